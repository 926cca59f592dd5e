"""What a run does to the store: plan every rule (`engine`, `rules`, `summary`, `guards`,
`candidates`, `similar`, `since`), apply it through the journal, and reverse it (`undo`);
the review queue, the run history and the optional LLM (`llm`, `llm_bridge`)."""
