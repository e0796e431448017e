build-me/privsep/caps.o: privsep/caps.c privsep/privsep.h ipc/ipc.h \
 common/log.h
privsep/privsep.h:
ipc/ipc.h:
common/log.h:
