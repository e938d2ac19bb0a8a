# mpishim top-level driver.
#
#   make               build the library for every host MPI found:
#                      build/openmpi/libmpishim.so, build/mpich/libmpishim.so
#   make check         unit + integration tests on every host (tests/run.sh)
#   make check-multinode  only the multi-node tests (root, network namespaces)
#   make demo          the multithreaded demo, raw host vs shim, side by side
#   make stress        randomised multithreaded traffic, every payload checked,
#                      under the shim on every host (tests/stress/run.sh)
#   make install PREFIX=/usr/local
#   make HOSTS=mpich   restrict to some hosts
#
# Each host gets its own autoconf build directory; configure is generated
# and run here when missing or stale, so a fresh checkout needs only `make`.

PREFIX ?= /usr/local
BUILD  := build
# Debian's flavour-suffixed wrappers; a host is built when its wrapper exists.
HOSTS  ?= $(foreach h,openmpi mpich,$(if $(shell command -v mpicc.$(h) 2>/dev/null),$(h)))
CONFIGURE_FLAGS ?=

ifeq ($(strip $(HOSTS)),)
$(error no host MPI found: install libopenmpi-dev openmpi-bin and/or libmpich-dev mpich, or set HOSTS)
endif

all: $(HOSTS:%=host-%) $(BUILD)/mpishim $(BUILD)/mpishim-info

configure: configure.ac
	autoconf

$(BUILD)/%/config.status: configure
	@mkdir -p $(BUILD)/$*
	cd $(BUILD)/$* && ../../configure --with-mpi=$* $(CONFIGURE_FLAGS)

$(HOSTS:%=host-%): host-%: $(BUILD)/%/config.status
	@echo "== $* =="
	@$(MAKE) --no-print-directory -C $(BUILD)/$*

# Launcher and info dispatcher: scripts that find build/<host>/ next to them.
$(BUILD)/mpishim: tools/mpishim.in
	@mkdir -p $(BUILD)
	sed -e 's|@LIBROOT@|$(CURDIR)/$(BUILD)|g' -e 's|@HOSTS@|$(HOSTS)|g' $< > $@ && chmod +x $@
$(BUILD)/mpishim-info: tools/mpishim-info.in
	@mkdir -p $(BUILD)
	sed -e 's|@LIBROOT@|$(CURDIR)/$(BUILD)|g' -e 's|@HOSTS@|$(HOSTS)|g' $< > $@ && chmod +x $@

check: all
	tests/run.sh $(HOSTS)

# Only the multi-node cases: 2 network namespaces as nodes, TCP
# between them (tools/netns-cluster.sh). Root only; make check runs them too.
check-multinode: all
	TEST_MULTINODE=only tests/run.sh $(HOSTS)

# The unit and MPI tests again, library and programs built with
# ThreadSanitizer (build/<host>-tsan). Reports inside the host MPI's own (uninstrumented)
# code are suppressed by tests/tsan.supp; any other report fails the case.
# ignore_noninstrumented_modules: the host's own memory accesses through
# intercepted functions (its memcpy into a receive buffer, made by whichever
# thread drives the host's progress) are not recorded, because only the
# host's atomics, invisible to TSan, order them before the owner's reads; the
# tsan_canary case checks that races in instrumented code are still found.
# UCX's malloc hooks (MPICH's transport) crash under TSan's allocator, also
# without the shim, so they are turned off for these runs.
TSAN_FLAGS = -g -O1 -fsanitize=thread
check-tsan: all
	@for h in $(HOSTS); do \
	  d=$(BUILD)/$$h-tsan; mkdir -p $$d; \
	  [ -f $$d/config.status ] || (cd $$d && ../../configure --with-mpi=$$h CFLAGS="$(TSAN_FLAGS)" \
	      LDFLAGS=-fsanitize=thread $(CONFIGURE_FLAGS) > configure.out) || exit 1; \
	  $(MAKE) --no-print-directory -C $$d libmpishim.so tests || exit 1; \
	done
	TEST_VARIANT=tsan UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp exitcode=66 second_deadlock_stack=1 ignore_noninstrumented_modules=1" \
	  tests/run.sh $(HOSTS)

# The unit and MPI tests again with AddressSanitizer +
# UndefinedBehaviorSanitizer (build/<host>-asan): the shim and the test programs instrumented, the
# hosts not. Leak reports are off (the hosts keep memory to exit); any other
# report fails the case (halt_on_error, exit code 66). Open MPI's memory
# patcher and UCX's malloc hooks fight ASan's allocator, also without the
# shim, so both are turned off for these runs.
ASAN_FLAGS = -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
check-asan: all
	@for h in $(HOSTS); do \
	  d=$(BUILD)/$$h-asan; mkdir -p $$d; \
	  [ -f $$d/config.status ] || (cd $$d && ../../configure --with-mpi=$$h CFLAGS="$(ASAN_FLAGS)" \
	      LDFLAGS="-fsanitize=address,undefined" $(CONFIGURE_FLAGS) > configure.out) || exit 1; \
	  $(MAKE) --no-print-directory -C $$d libmpishim.so tests || exit 1; \
	done
	TEST_VARIANT=asan UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no OMPI_MCA_memory=^patcher \
	  ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:exitcode=66:verify_asan_link_order=0" \
	  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=66" \
	  tests/run.sh $(HOSTS)

demo: all
	examples/demo.sh $(HOSTS)

stress: all
	tests/stress/run.sh $(HOSTS)

# The Multirate benchmark (bench/README.md): raw host vs shim, medians.
bench: all
	$(MAKE) -C bench

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 644 include/mpishim.h include/mpishim_f.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 docs/mpishim.1 docs/mpishim-info.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 docs/mpishim.7 $(DESTDIR)$(PREFIX)/share/man/man7/
	for h in $(HOSTS); do \
	  d=$(DESTDIR)$(PREFIX)/lib/mpishim/$$h; install -d $$d; \
	  install -m 755 $(BUILD)/$$h/libmpishim.so $(BUILD)/$$h/mpishim-info $$d/; \
	  if [ -d $(BUILD)/$$h/psmstub ]; then \
	    install -d $$d/psmstub && install -m 755 $(BUILD)/$$h/psmstub/lib* $$d/psmstub/; fi; \
	  sed -e "s|@PREFIX@|$(PREFIX)|g" -e "s|@HOST@|$$h|g" tools/mpishim.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/mpishim-$$h.pc; \
	done
	sed -e "s|@PREFIX@|$(PREFIX)|g" -e "s|@HOST@|$(firstword $(HOSTS))|g" tools/mpishim.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/mpishim.pc
	sed -e 's|@LIBROOT@|$(PREFIX)/lib/mpishim|g' -e 's|@HOSTS@|$(HOSTS)|g' tools/mpishim.in \
	  > $(DESTDIR)$(PREFIX)/bin/mpishim && chmod 755 $(DESTDIR)$(PREFIX)/bin/mpishim
	sed -e 's|@LIBROOT@|$(PREFIX)/lib/mpishim|g' -e 's|@HOSTS@|$(HOSTS)|g' tools/mpishim-info.in \
	  > $(DESTDIR)$(PREFIX)/bin/mpishim-info && chmod 755 $(DESTDIR)$(PREFIX)/bin/mpishim-info

clean:
	rm -rf $(BUILD)

distclean: clean
	rm -rf configure autom4te.cache

.PHONY: all check check-multinode check-tsan check-asan demo stress bench install clean distclean $(HOSTS:%=host-%)
