# Agrippa — GNU make build.
#   make            build agrippad, agrippactl and agrippa (hardened, -O2)
#   make check      build an ASan+UBSan tree and run every test
#   make deps       install the Debian packages the build and tests need
#   make fuzz       run each libFuzzer target for FUZZ_TIME seconds
#   make demo       build, set up and run the daemon in the foreground
#   make install    install under $(DESTDIR)$(PREFIX)
#   make uninstall  remove what make install put there
#   make deb        build $(DEB_BUILD)/agrippa_VERSION_ARCH.deb (scripts/mkdeb.sh)

PREFIX    ?= /usr/local
SBINDIR   ?= $(PREFIX)/sbin
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
DESTDIR   ?=
BUILD     ?= build
SANITIZE  ?= 0
FUZZ_TIME ?= 30
VERSION   := 0.1.0

CC        ?= cc
PKGS      := libpq libevent libsodium yaml-0.1 msgpack libseccomp libcap jansson libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN      := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
             -Wmissing-prototypes -Wvla -Wformat=2 -Wno-unused-parameter
BASEFLAGS := -std=c17 -D_GNU_SOURCE -DAGRIPPA_VERSION='"$(VERSION)"' \
             -DAGRIPPA_DATADIR='"$(PREFIX)/share/agrippa"' -I. -I$(BUILD) $(WARN)
ifeq ($(SANITIZE),1)
OPTFLAGS  := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
             -fno-omit-frame-pointer -DAGRIPPA_SANITIZE=1
LDOPT     := -fsanitize=address,undefined
else
OPTFLAGS  := -O2 -g -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE \
             -fstack-clash-protection
LDOPT     := -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack
endif
SECCOMP_DEBUG ?= 0
ifeq ($(SECCOMP_DEBUG),1)
OPTFLAGS += -DAGRIPPA_SECCOMP_DEBUG=1
endif
ALL_CFLAGS  = $(BASEFLAGS) $(OPTFLAGS) $(PKG_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(LDOPT) $(LDFLAGS)

# Every .c under these folders except the two mains goes into libagrippa.a,
# so unit tests link the same objects the daemon runs.
LIB_DIRS  := common ipc privsep egress tmpl supervisor engine runner httpd proxy sandbox remover
MAIN_SRC  := supervisor/agrippad.c ctl/agrippactl.c sandbox/main.c remover/main.c
LIB_SRC   := $(filter-out $(MAIN_SRC),$(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)))
CTL_SRC   := $(filter-out ctl/agrippactl.c,$(wildcard ctl/*.c))
SQL_FILES := $(sort $(wildcard sql/migrations/*.sql)) $(sort $(wildcard sql/ops/*.sql))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/sqlgen.o
CTL_OBJ   := $(CTL_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_SRC  := $(wildcard tests/tools/*.c)
TOOL_BIN  := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tests/tools/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all check tests deps fuzz demo install uninstall deb clean bench users
all: $(BUILD)/agrippad $(BUILD)/agrippactl $(BUILD)/agrippa-sandbox $(BUILD)/agrippa-git \
     $(BUILD)/agrippa-tree $(BUILD)/agrippa $(BUILD)/agrippa-mcpc

$(BUILD)/sqlgen.c: scripts/sqlgen.sh $(SQL_FILES)
	@mkdir -p $(@D)
	sh scripts/sqlgen.sh $(SQL_FILES) > $@.tmp && mv $@.tmp $@

$(BUILD)/sqlgen.o: $(BUILD)/sqlgen.c
	$(CC) $(ALL_CFLAGS) -Isupervisor -c -o $@ $<

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/libagrippa.a: $(LIB_OBJ) $(CTL_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/agrippad: $(BUILD)/supervisor/agrippad.o $(BUILD)/libagrippa.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/agrippactl: $(BUILD)/ctl/agrippactl.o $(BUILD)/libagrippa.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The users' client (client/) is a program of its own over the HTTP API: it
# links libcurl, jansson and libsodium, none of the daemon.
CLI_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(wildcard client/*.c))
CLI_LIBS := $(shell pkg-config --libs libcurl jansson libsodium 2>/dev/null)
$(BUILD)/agrippa: $(CLI_OBJ)
	$(CC) $(ALL_LDFLAGS) -Wl,--as-needed -o $@ $^ $(CLI_LIBS)
$(BUILD)/tests/test_cli_text: tests/unit/test_cli_text.c $(BUILD)/client/text.o
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(CLI_LIBS) $$(pkg-config --libs cmocka)

# The tool server links only what it uses (see sandbox/main.c).
SBX_LIBS := $(shell pkg-config --libs libevent libsodium msgpack libseccomp libcap 2>/dev/null)
$(BUILD)/agrippa-sandbox: $(BUILD)/sandbox/main.o $(BUILD)/libagrippa.a
	$(CC) $(ALL_LDFLAGS) -Wl,--as-needed -o $@ $^ $(SBX_LIBS)

# The tree tools are started for every checkout and removal: small and quick.
TREE_LIBS := $(shell pkg-config --libs libcap 2>/dev/null)
$(BUILD)/agrippa-tree: $(BUILD)/remover/main.o $(BUILD)/libagrippa.a
	$(CC) $(ALL_LDFLAGS) -Wl,--as-needed -o $@ $^ $(TREE_LIBS)

# mcp test's MCP client (mcpc/main.c): the runner's client code alone.
MCPC_LIBS := $(shell pkg-config --libs libevent jansson libsodium 2>/dev/null)
$(BUILD)/agrippa-mcpc: $(BUILD)/mcpc/main.o $(BUILD)/libagrippa.a
	$(CC) $(ALL_LDFLAGS) -Wl,--as-needed -o $@ $^ $(MCPC_LIBS)

# The conformance suite's client (mcpc/conformance.c): the runner's client
# through the proxy's Streamable HTTP bridge; built for the tests only.
CONF_LIBS := $(shell pkg-config --libs libevent jansson libsodium libcurl 2>/dev/null)
$(BUILD)/agrippa-mcp-conformance: $(BUILD)/mcpc/conformance.o $(BUILD)/libagrippa.a
	$(CC) $(ALL_LDFLAGS) -Wl,--as-needed -o $@ $^ $(CONF_LIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $$(pkg-config --libs cmocka)

$(BUILD)/tests/tools/%: tests/tools/%.c $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The git helper links libgit2, which stays out of agrippad: its code is
# built apart from libagrippa.a, into a program of its own.
GH_OBJ  := $(BUILD)/githelper/checkout.o $(BUILD)/githelper/diff.o $(BUILD)/githelper/mirror.o \
           $(BUILD)/githelper/push.o $(BUILD)/githelper/forge.o $(BUILD)/githelper/stat.o
GH_LIBS := $(shell pkg-config --libs libgit2 2>/dev/null)
GIT_LIBS := $(GH_LIBS) $(shell pkg-config --libs libevent libsodium msgpack libcurl jansson 2>/dev/null)
$(BUILD)/agrippa-git: $(BUILD)/githelper/main.o $(GH_OBJ) $(BUILD)/libagrippa.a
	$(CC) $(ALL_LDFLAGS) -Wl,--as-needed -o $@ $^ $(GIT_LIBS)
$(BUILD)/tests/tools/mkrepo: tests/tools/mkrepo.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(GH_LIBS)
$(BUILD)/tests/test_checkout: tests/unit/test_checkout.c $(GH_OBJ) $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(GH_LIBS) $(PKG_LIBS) $$(pkg-config --libs cmocka)
$(BUILD)/tests/test_diff: tests/unit/test_diff.c $(GH_OBJ) $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(GH_LIBS) $(PKG_LIBS) $$(pkg-config --libs cmocka)
$(BUILD)/tests/test_push: tests/unit/test_push.c $(GH_OBJ) $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(GH_LIBS) $(PKG_LIBS) $$(pkg-config --libs cmocka)
$(BUILD)/tests/tools/pushreq: tests/tools/pushreq.c $(GH_OBJ) $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(GH_LIBS) $(PKG_LIBS)
# The chowner's list is read back by the git helper's reader.
$(BUILD)/tests/test_remover: tests/unit/test_remover.c $(BUILD)/githelper/stat.o $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $$(pkg-config --libs cmocka)
# The forge client needs libcurl and jansson, not libgit2.
$(BUILD)/tests/test_forge: tests/unit/test_forge.c $(BUILD)/githelper/forge.o $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $$(pkg-config --libs cmocka)
$(BUILD)/tests/tools/forgereq: tests/tools/forgereq.c $(BUILD)/githelper/forge.o $(BUILD)/libagrippa.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# Probes that run inside sandboxes: static, no sanitizers, no libagrippa.
PROBE_BIN := $(BUILD)/tests/probe/try_syscall
$(BUILD)/tests/probe/try_syscall: tests/tools/try_syscall.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -O1 -DPROBE_STATIC -static -o $@ $<

tests: all $(UNIT_BIN) $(TOOL_BIN) $(PROBE_BIN) $(BUILD)/agrippa-mcp-conformance

# The test build is a separate sanitizer tree; every test runs against it.
check:
	$(MAKE) BUILD=build-san SANITIZE=1 tests
	sh tests/run.sh build-san

bench:
	$(MAKE) BUILD=build all tests $(BENCH_BIN)
	sh bench/run.sh build

deps:
	sh scripts/deps.sh

users:
	sh scripts/mkusers.sh

FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
fuzz:
	@mkdir -p build-fuzz
	sh tests/fuzz/run.sh "$(FUZZ_TIME)" $(FUZZ_SRC)

demo:
	sh scripts/demo.sh

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 \
	    $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(BUILD)/agrippa $(DESTDIR)$(BINDIR)/
	install -m 0644 docs/agrippa.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0755 $(BUILD)/agrippad $(BUILD)/agrippactl $(BUILD)/agrippa-sandbox $(BUILD)/agrippa-git \
	    $(BUILD)/agrippa-tree $(BUILD)/agrippa-mcpc \
	    $(DESTDIR)$(SBINDIR)/
	install -m 0644 docs/agrippad.8 docs/agrippactl.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 docs/agrippad.conf.5 docs/agrippa-template.5 $(DESTDIR)$(MANDIR)/man5/
	install -d $(DESTDIR)$(PREFIX)/share/agrippa/templates
	install -m 0644 templates/*.yaml $(DESTDIR)$(PREFIX)/share/agrippa/templates/
	install -d $(DESTDIR)$(PREFIX)/share/agrippa/examples/mcp
	install -m 0644 docs/examples/mcp/*.json $(DESTDIR)$(PREFIX)/share/agrippa/examples/mcp/
	install -d $(DESTDIR)$(PREFIX)/share/agrippa/ui
	install -m 0644 ui/* $(DESTDIR)$(PREFIX)/share/agrippa/ui/
	install -d $(DESTDIR)$(PREFIX)/share/agrippa/rc.d
	install -m 0644 rc.d/agrippad.openbsd rc.d/agrippad.service rc.d/agrippad.init \
	    $(DESTDIR)$(PREFIX)/share/agrippa/rc.d/
	install -d $(DESTDIR)$(SYSCONFDIR)
	test -e $(DESTDIR)$(SYSCONFDIR)/agrippad.yaml || \
	    install -m 0644 docs/agrippad.yaml.sample $(DESTDIR)$(SYSCONFDIR)/agrippad.yaml
	if [ -z "$(DESTDIR)" ]; then sh scripts/mkusers.sh; fi

# Everything install put, then the directories of ours it made, once empty.
# The configuration file stays when it is not the sample any more (the
# operator's), as do the service users.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/agrippa $(DESTDIR)$(MANDIR)/man1/agrippa.1
	rm -f $(addprefix $(DESTDIR)$(SBINDIR)/,agrippad agrippactl agrippa-sandbox agrippa-git \
	    agrippa-tree agrippa-mcpc)
	rm -f $(DESTDIR)$(MANDIR)/man8/agrippad.8 $(DESTDIR)$(MANDIR)/man8/agrippactl.8
	rm -f $(DESTDIR)$(MANDIR)/man5/agrippad.conf.5 $(DESTDIR)$(MANDIR)/man5/agrippa-template.5
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/agrippa/templates/,$(notdir $(wildcard templates/*.yaml)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/agrippa/examples/mcp/,$(notdir $(wildcard docs/examples/mcp/*.json)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/agrippa/ui/,$(notdir $(wildcard ui/*)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/agrippa/rc.d/,agrippad.openbsd agrippad.service agrippad.init)
	for d in templates examples/mcp examples ui rc.d ""; do \
	    if [ -d $(DESTDIR)$(PREFIX)/share/agrippa/$$d ]; then \
	        rmdir --ignore-fail-on-non-empty $(DESTDIR)$(PREFIX)/share/agrippa/$$d; fi; done
	if cmp -s docs/agrippad.yaml.sample $(DESTDIR)$(SYSCONFDIR)/agrippad.yaml; then \
	    rm -f $(DESTDIR)$(SYSCONFDIR)/agrippad.yaml; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/agrippad.yaml ]; then \
	    echo "uninstall: keeping $(DESTDIR)$(SYSCONFDIR)/agrippad.yaml (changed)"; fi

# The Debian package, from a tree of its own built for /usr.
DEB_BUILD ?= build-deb
deb:
	$(MAKE) BUILD=$(DEB_BUILD) PREFIX=/usr SANITIZE=0 all
	sh scripts/mkdeb.sh $(DEB_BUILD) $(VERSION) $(DEB_BUILD)

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
