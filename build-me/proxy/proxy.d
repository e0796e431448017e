build-me/proxy/proxy.o: proxy/proxy.c common/child.h ipc/ipc.h \
 ipc/ipc_msg.h ipc/ipc.h common/log.h proxy/proxy.h
common/child.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
common/log.h:
proxy/proxy.h:
