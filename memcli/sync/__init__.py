"""Sharing a store through git (SPEC 13): the files git needs (`gitfiles`), the merge
drivers for memcli's own files (`drivers`), resolving what git cannot merge (`conflicts`),
and `memcli sync` itself (`sync`). Git is driven through its command line (`git`)."""
