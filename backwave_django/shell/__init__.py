"""The Shell: threads, timers and connections. It turns the world into events for the Node Driver and obeys
the commands it returns. No policy lives here."""
