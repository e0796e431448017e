build-me/privsep/rlimits.o: privsep/rlimits.c privsep/privsep.h ipc/ipc.h \
 common/log.h
privsep/privsep.h:
ipc/ipc.h:
common/log.h:
