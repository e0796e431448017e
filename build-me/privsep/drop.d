build-me/privsep/drop.o: privsep/drop.c privsep/privsep.h ipc/ipc.h \
 common/log.h
privsep/privsep.h:
ipc/ipc.h:
common/log.h:
