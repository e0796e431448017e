build-me/supervisor/agrippad.o: supervisor/agrippad.c common/log.h \
 engine/engine.h httpd/httpd.h proxy/proxy.h supervisor/config.h \
 supervisor/supervisor.h ipc/ipc.h ipc/ipc_msg.h ipc/ipc.h \
 supervisor/pgembed.h
common/log.h:
engine/engine.h:
httpd/httpd.h:
proxy/proxy.h:
supervisor/config.h:
supervisor/supervisor.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
supervisor/pgembed.h:
