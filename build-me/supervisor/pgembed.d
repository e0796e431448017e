build-me/supervisor/pgembed.o: supervisor/pgembed.c \
 /usr/include/postgresql/libpq-fe.h \
 /usr/include/postgresql/postgres_ext.h \
 /usr/include/postgresql/pg_config_ext.h common/log.h common/util.h \
 privsep/privsep.h ipc/ipc.h supervisor/pgembed.h supervisor/config.h
/usr/include/postgresql/libpq-fe.h:
/usr/include/postgresql/postgres_ext.h:
/usr/include/postgresql/pg_config_ext.h:
common/log.h:
common/util.h:
privsep/privsep.h:
ipc/ipc.h:
supervisor/pgembed.h:
supervisor/config.h:
