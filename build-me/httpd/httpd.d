build-me/httpd/httpd.o: httpd/httpd.c common/child.h ipc/ipc.h \
 ipc/ipc_msg.h ipc/ipc.h common/log.h httpd/httpd.h
common/child.h:
ipc/ipc.h:
ipc/ipc_msg.h:
ipc/ipc.h:
common/log.h:
httpd/httpd.h:
