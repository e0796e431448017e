build-me/privsep/seccomp.o: privsep/seccomp.c privsep/privsep.h ipc/ipc.h \
 common/log.h
privsep/privsep.h:
ipc/ipc.h:
common/log.h:
