"""The operator's plugins, one per job kind: each turns its framework's rules
(:mod:`kubetrain.frameworks`) into the children of a job and reads its status from them."""
