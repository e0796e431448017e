build-me/ipc/ipc_cursor.o: ipc/ipc_cursor.c ipc/ipc.h
ipc/ipc.h:
