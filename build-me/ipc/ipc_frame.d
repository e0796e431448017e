build-me/ipc/ipc_frame.o: ipc/ipc_frame.c ipc/ipc.h common/log.h
ipc/ipc.h:
common/log.h:
