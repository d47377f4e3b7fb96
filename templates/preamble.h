/* How a loopkit plugin works (include/loopkit/plugin.h is the ABI, host.h
 * what the host offers a plugin, `man loopkit-plugin` the reference):
 * - The .so exports one symbol, lk_plugin_descriptor (the end of this
 *   file); everything else is static, and the Makefile builds with
 *   -fvisibility=hidden. The host checks the descriptor's abi_version and
 *   size before it runs any code of ours.
 * - The options table declares what the config's [@NAME@] section may
 *   hold: each option's type, default and help, and for a number its range
 *   in the last field ("[0, inf)", "(0, 1]"; NULL: any). The host checks
 *   the section against it (an unknown key, a malformed or out-of-range
 *   number, an enum value not among its choices) before create and names
 *   the option at fault, so create only reads the values.
 * - create gets a host handle, valid until destroy, and returns the
 *   instance as *self; every entry gets self back. Roles of a config that
 *   name the same plugin share one instance of it.
 * - Every entry returns 0, or a negative LK_E* code made by
 *   lk_fail(host, code, "message"): the host adds which plugin and entry
 *   failed, stops the run and shows the message, so name the value at
 *   fault. A plugin never prints, exits or aborts; lk_log sends a line
 *   where the user reads the run's log.
 * - Parameters (lk_host_add_param) and state that must survive a resume
 *   (lk_host_add_state) are allocated by the host, in create: it owns
 *   them, zero-fills them and saves them in every checkpoint. On --resume
 *   it loads them back and calls check_state, where a plugin refuses a
 *   saved value it cannot work with before anything uses it.
 * - Randomness comes from the run's seeded generator only (lk_host_rng, or
 *   a generator of our own seeded from lk_host_seed): the same config and
 *   seed then give the same run, bit for bit. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>
