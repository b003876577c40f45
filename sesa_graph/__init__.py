"""sesa-graph agent core: typed state, rollouts, tag protocol, prompts, rewards, skill memory, policies."""
