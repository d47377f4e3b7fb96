/* loopkit — a training-loop framework whose pieces are plugins composed into
 * libffi closures. Include this header, or the part you need. */
#ifndef LOOPKIT_H
#define LOOPKIT_H

#include "loopkit/closure.h"
#include "loopkit/config.h"
#include "loopkit/error.h"
#include "loopkit/export.h"
#include "loopkit/host.h"
#include "loopkit/plugin.h"
#include "loopkit/run.h"
#include "loopkit/tensor.h"
#include "loopkit/version.h"

#endif
