"""sesa-graph agent core: typed state, nodes, tag protocol, prompts, rewards, skill memory, policies."""
