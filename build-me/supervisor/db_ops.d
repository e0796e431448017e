build-me/supervisor/db_ops.o: supervisor/db_ops.c common/log.h \
 supervisor/db.h ipc/ipc.h ipc/ipc_msg.h ipc/ipc.h
common/log.h:
supervisor/db.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
