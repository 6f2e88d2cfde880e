"""privrl server: the FastAPI billboard server, a thin HTTP layer over `privrl.run.Run`."""
