build-me/supervisor/config.o: supervisor/config.c supervisor/config.h
supervisor/config.h:
