#!/usr/bin/python3
"""Top-k accuracy and macro F1 of fixed logits, computed with torch 1.13.

Run with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/metrics_reference.py > tests/data/metrics.ref

The logits and labels are made by the same hash tests/test_models.c uses
(value(i, salt): a uint32 hash of the index, scaled to [-1, 1) in f32), so
both sides score the same numbers. Class C-1 is never a label and its
logit is -10, so it is never predicted either: macro F1 averages over the
classes that occur as a label or a prediction (sklearn's f1_score and
torchmetrics' MulticlassF1Score(average="macro") leave out a class with no
true positive, false positive or false negative). Top-k accuracy is
torchmetrics' MulticlassAccuracy(top_k=K, average="micro"): the share of
samples whose label is among the K largest logits (torch.topk; the script
checks that no row has ties, where torch.topk's choice would be
arbitrary).

Each case is written as

    case N C K
    acc_top VALUE
    f1 VALUE

with %.17g numbers.
"""
import torch


def value(i, salt):
    h = ((i * 2654435761) ^ (salt * 40503)) & 0xffffffff
    h ^= h >> 13
    h = (h * 0x5bd1e995) & 0xffffffff
    h ^= h >> 15
    # As C does it: h % 20001 / 10000.0 - 1.0 in double, then to float.
    return float(torch.tensor((h % 20001) / 10000.0 - 1.0,
                              dtype=torch.float32))


def data(n, c):
    z = torch.tensor([[value(i * c + j, 7) for j in range(c)]
                      for i in range(n)], dtype=torch.float32)
    z[:, c - 1] = -10
    y = torch.tensor([int((value(i, 99) + 1) * 1000) % (c - 1)
                      for i in range(n)], dtype=torch.int64)
    return z, y


def top_k_accuracy(z, y, k):
    for row in z:
        assert len(set(row.tolist())) == len(row), "a tie in a row"
    top = torch.topk(z, k, dim=1).indices
    return (top == y[:, None]).any(dim=1).double().mean().item()


def macro_f1(z, y, c):
    pred = z.argmax(dim=1)
    tp = torch.bincount(y[pred == y], minlength=c).double()
    fp = torch.bincount(pred[pred != y], minlength=c).double()
    fn = torch.bincount(y[pred != y], minlength=c).double()
    present = (tp + fp + fn) > 0
    f1 = 2 * tp / (2 * tp + fp + fn).clamp(min=1)
    return (f1[present].sum() / present.sum()).item()


def main():
    print("# torch %s: top-k accuracy and macro F1 "
          "(tests/torch/metrics_reference.py)" % torch.__version__)
    for n, c, k in ((37, 6, 2), (37, 6, 3), (200, 11, 5)):
        z, y = data(n, c)
        print("case %d %d %d" % (n, c, k))
        print("acc_top %.17g" % top_k_accuracy(z, y, k))
        print("f1 %.17g" % macro_f1(z, y, c))


main()
