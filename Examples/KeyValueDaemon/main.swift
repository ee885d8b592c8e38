print("kv-daemon: scaffold")
