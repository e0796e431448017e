build-me/ipc/ipc_chan.o: ipc/ipc_chan.c ipc/ipc_msg.h ipc/ipc.h \
 common/log.h
ipc/ipc_msg.h:
ipc/ipc.h:
common/log.h:
