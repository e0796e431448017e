build-me/supervisor/listen.o: supervisor/listen.c common/log.h \
 supervisor/supervisor.h ipc/ipc.h ipc/ipc_msg.h ipc/ipc.h \
 supervisor/config.h supervisor/pgembed.h
common/log.h:
supervisor/supervisor.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
supervisor/config.h:
supervisor/pgembed.h:
