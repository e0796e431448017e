build-me/supervisor/control.o: supervisor/control.c common/log.h \
 supervisor/db.h ipc/ipc.h ipc/ipc_msg.h ipc/ipc.h \
 supervisor/supervisor.h supervisor/config.h supervisor/pgembed.h
common/log.h:
supervisor/db.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
supervisor/supervisor.h:
supervisor/config.h:
supervisor/pgembed.h:
