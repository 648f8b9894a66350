"""Path adapters, one per backend (§1, §4): each answers §4's questions for its path and
states its placement (§5). Heavy runtimes import lazily, inside each adapter."""
