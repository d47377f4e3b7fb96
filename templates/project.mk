# Builds @NAME@.so, a loopkit plugin, with nothing but an installed loopkit:
#   make && loopkit train @NAME@.ini
# pkg-config must find loopkit.pc: set PKG_CONFIG_PATH to its directory
# when loopkit is installed where pkg-config does not look.
#
# The plugin does not link libloopkit: the lk_* functions it calls are the
# host's, bound when loopkit loads it. loopkit refuses to load a plugin
# that someone else could change, so the file is made writable by you
# only, whatever your umask.
CFLAGS ?= -O2 -g -Wall -Wextra
LOOPKIT_CFLAGS := $(shell pkg-config --cflags loopkit 2>/dev/null)

ifeq ($(filter clean,$(MAKECMDGOALS)),)
ifneq ($(shell pkg-config --exists loopkit && echo yes),yes)
$(error pkg-config does not find loopkit: set PKG_CONFIG_PATH to the directory of loopkit.pc)
endif
endif

@NAME@.so: @NAME@.c
	$(CC) -std=c11 -shared -fPIC -fvisibility=hidden $(CFLAGS) $(LOOPKIT_CFLAGS) $< -o $@ -lm
	chmod go-w $@

clean:
	rm -f @NAME@.so

.PHONY: clean
