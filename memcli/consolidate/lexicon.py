"""A compact lexicon of words that cannot stand in for each other: the `substitution` guard's data.

Fuzzy scores see "a small dog" and "a big dog" as near-identical, and so do word-bag
embeddings. What tells them apart is knowing that *small* and *big* are opposites, or that
*flute* and *guitar* are two different members of one kind (co-hyponyms). This module holds
that knowledge for the words agent memories and everyday sentences use most, as *classes*:
each class is a set of mutually exclusive *senses*, and each sense lists the forms that mean
the same thing ("big large huge"). Two words contrast when some class holds them in different
senses; two words of one sense (synonyms, inflections) never contrast, and a word and its
hypernym ("kid" and "boy") are never put in one class, so they never contrast either.

Words with a common unrelated sense are left out ("mouse", "keyboard", "get", "go", "test",
"master"): a false contrast keeps two memories apart that should merge, and the review queue
pays for it. :func:`contrast` is a pure lookup.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["CLASSES", "contrast", "known_words", "senses"]

# class name -> senses, each a space-separated list of the forms that mean one thing.
CLASSES: dict[str, tuple[str, ...]] = {
    # --- opposites (two senses each)
    "size": ("small smaller smallest little tiny", "big bigger biggest large larger largest huge"),
    "length": ("short shorter shortest", "long longer longest"),
    "height": ("tall taller tallest", "short shorter shortest"),
    "width": ("narrow narrower", "wide wider broad"),
    "thickness": ("thin thinner", "thick thicker"),
    "amount": ("few fewer less least", "many more most"),
    "temperature": ("hot hotter warm warmer", "cold colder cool cooler chilly"),
    "age": ("old older oldest", "new newer newest"),
    "youth": ("young younger youngest", "old older oldest elderly"),
    "time": ("early earlier earliest", "late later latest"),
    "rank": ("first", "last"),
    "speed": ("fast faster fastest quick quicker quickly", "slow slower slowest slowly"),
    "quality": ("good better best", "bad worse worst"),
    "level": ("high higher highest", "low lower lowest"),
    "fullness": ("empty empties emptied emptying", "fill fills filled filling full"),
    "openness": ("open opens opened opening", "close closes closed closing shut shuts"),
    "inside": ("in inside into within", "out outside"),
    "vertical": ("up upward upwards upstairs", "down downward downwards downstairs"),
    "above": ("above", "below beneath underneath"),
    "over": ("over", "under"),
    "switch": ("on", "off"),
    "side": ("left", "right"),
    "sequence": ("before", "after"),
    "compass": ("north northern", "south southern", "east eastern", "west western"),
    "truth": ("true", "false"),
    "frequency": ("always", "sometimes often usually", "rarely seldom", "never"),
    "quantity": ("all every each", "some several", "none"),
    "lock": ("lock locks locked locking", "unlock unlocks unlocked unlocking"),
    "mount": ("mount mounts mounted mounting", "unmount unmounts unmounted unmounting"),
    "install": ("install installs installed installing", "uninstall uninstalls uninstalled uninstalling"),
    "subscribe": ("subscribe subscribes subscribed", "unsubscribe unsubscribes unsubscribed"),
    "connect": ("connect connects connected connecting", "disconnect disconnects disconnected"),
    "attach": ("attach attaches attached attaching", "detach detaches detached detaching"),
    "encrypt": ("encrypt encrypts encrypted encrypting encryption",
                "decrypt decrypts decrypted decrypting decryption"),
    "compress": ("compress compresses compressed compressing compression",
                 "decompress decompresses decompressed decompressing decompression"),
    "transfer": ("push pushes pushed pushing", "pull pulls pulled pulling"),
    "load": ("upload uploads uploaded uploading", "download downloads downloaded downloading"),
    "create": ("create creates created creating", "delete deletes deleted deleting drop drops dropped "
               "dropping destroy destroys destroyed"),
    "show": ("show shows showed shown showing", "hide hides hid hidden hiding"),
    "verdict": ("pass passes passed passing", "fail fails failed failing"),
    "win": ("win wins won winning", "lose loses lost losing"),
    "raise": ("raise raises raised raising", "lower lowers lowered lowering"),
    "grow": ("grow grows grew grown growing expand expands expanded", "shrink shrinks shrank shrunk "
             "shrinking"),
    "sort": ("ascending asc", "descending desc"),
    "flow": ("inbound ingress incoming", "outbound egress outgoing"),
    "axis": ("horizontal horizontally", "vertical vertically"),
    "io": ("read reads reading", "write writes writing wrote written"),
    "rw": ("reader readers", "writer writers"),
    "data": ("input inputs", "output outputs"),
    "exchange": ("request requests", "response responses reply replies"),
    "tier": ("client clients", "server servers"),
    "stack": ("frontend front-end", "backend back-end"),
    "queue": ("producer producers publisher publishers", "consumer consumers subscriber subscribers"),
    "mail": ("sender senders", "receiver receivers recipient recipients"),
    "stream": ("upstream", "downstream"),
    "replication": ("primary leader", "replica replicas secondary follower followers standby"),
    "endpoint": ("source sources", "target targets destination destinations"),
    "review": ("author authors", "reviewer reviewers"),
    "privilege": ("admin admins administrator administrators", "user users"),
    "semver": ("major", "minor", "patch"),
    "loglevel": ("debug", "info", "warn warning warnings", "error errors"),
    # --- kinds (co-hyponyms: different members of one kind)
    "people": ("man men gentleman gentlemen guy guys", "woman women lady ladies", "boy boys",
               "girl girls"),
    "ages": ("kid kids child children toddler toddlers", "man men", "woman women lady ladies"),
    "activity": ("riding ride rides rode", "standing stand stands stood", "sitting sit sits sat",
                 "walking walk walks walked", "running run runs ran", "dancing dance dances danced",
                 "drawing draw draws drew", "singing sing sings sang", "swimming swim swims swam",
                 "jumping jump jumps jumped", "sleeping sleep sleeps slept", "eating eat eats ate",
                 "drinking drink drinks drank", "cooking cook cooks cooked", "climbing climb climbs",
                 "driving drive drives drove", "typing type types typed", "talking talk talks talked",
                 "lying lie lies lay", "crying cry cries cried", "laughing laugh laughs laughed",
                 "painting paint paints painted", "reading read reads", "writing write writes wrote"),
    "kitchen": ("slicing slice slices sliced cutting cut cuts chopping chop chops",
                "peeling peel peels peeled", "frying fry fries fried", "boiling boil boils boiled",
                "mixing mix mixes mixed stirring stir stirs"),
    "instrument": ("flute flutes", "guitar guitars", "piano pianos", "drum drums", "violin violins",
                   "cello cellos", "trumpet trumpets", "saxophone saxophones sax", "harp harps",
                   "banjo banjos", "ukulele ukuleles", "clarinet clarinets", "accordion"),
    "animal": ("dog dogs puppy puppies", "cat cats kitten kittens", "horse horses", "cow cows",
               "sheep", "goat goats", "pig pigs", "bird birds", "fish", "kangaroo kangaroos",
               "monkey monkeys", "elephant elephants", "lion lions", "tiger tigers", "bear bears",
               "rabbit rabbits", "snake snakes", "turtle turtles", "duck ducks", "panda pandas",
               "deer", "squirrel squirrels", "hamster hamsters", "dolphin dolphins"),
    "food": ("tomato tomatoes", "potato potatoes", "onion onions", "carrot carrots",
             "cucumber cucumbers", "garlic", "apple apples", "banana bananas", "lemon lemons",
             "egg eggs", "bread", "rice", "pasta noodles spaghetti", "cheese", "meat", "shrimp"),
    "color": ("red", "blue", "green", "yellow", "black", "white", "purple", "pink", "brown",
              "gray grey"),
    "vehicle": ("car cars", "bike bikes bicycle bicycles", "motorcycle motorcycles motorbike",
                "bus buses", "truck trucks", "boat boats", "train trains", "plane planes airplane"),
    "weekday": ("monday mondays", "tuesday tuesdays tue tues", "wednesday wednesdays",
                "thursday thursdays thu thurs", "friday fridays fri", "saturday saturdays",
                "sunday sundays"),
    "month": ("january jan", "february feb", "march", "april apr", "may", "june jun",
              "july jul", "august aug", "september sep sept", "october oct", "november nov",
              "december dec"),
    "duration": ("ms millisecond milliseconds msec", "sec secs second seconds",
                 "mins minute minutes", "hr hrs hour hours hourly", "day days daily",
                 "week weeks weekly", "month months monthly", "year years yearly annual annually"),
    "bytes": ("kb kib kilobyte kilobytes", "mb mib megabyte megabytes", "gb gib gigabyte gigabytes",
              "tb tib terabyte terabytes"),
    "environment": ("staging", "production prod", "development", "qa", "sandbox",
                    "preview"),
    "language": ("python", "ruby", "java", "javascript js", "typescript", "golang", "rust",
                 "php", "kotlin", "swift", "scala", "perl", "elixir", "haskell"),
    "packager": ("npm", "pnpm", "yarn", "pip", "poetry", "pipenv", "conda", "cargo", "maven",
                 "gradle", "brew homebrew", "apt"),
    "database": ("postgres postgresql psql", "mysql mariadb", "sqlite", "redis", "mongodb mongo",
                 "dynamodb", "cassandra", "elasticsearch", "opensearch", "clickhouse",
                 "snowflake", "bigquery"),
    "os": ("linux", "macos mac osx darwin", "windows", "android", "ios", "freebsd"),
    "cloud": ("aws", "gcp", "azure"),
    "format": ("json", "yaml yml", "toml", "xml", "csv", "ini", "parquet", "protobuf"),
    "testing": ("pytest", "unittest", "jest", "mocha", "vitest", "rspec"),
    "ci": ("jenkins", "circleci", "travis", "buildkite", "teamcity"),
    "forge": ("github", "gitlab", "bitbucket"),
    "browser": ("chrome chromium", "firefox", "safari"),
    "container": ("docker", "podman"),
    "vcs_action": ("merge merges merged merging", "rebase rebases rebased rebasing",
                   "squash squashes squashed squashing"),
}


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[tuple[str, int], ...]]:
    """word -> every (class, sense number) it belongs to."""
    index: dict[str, list[tuple[str, int]]] = {}
    for name, sense_list in CLASSES.items():
        for number, forms in enumerate(sense_list):
            for form in forms.split():
                index.setdefault(form, []).append((name, number))
    return {word: tuple(found) for word, found in index.items()}


def senses(word: str) -> tuple[tuple[str, int], ...]:
    """The (class, sense) entries of a lower-case word; a plural falls back to its singular."""
    index = _index()
    found = index.get(word)
    if found is None and len(word) > 3 and word.endswith("s"):
        found = index.get(word[:-1])
    return found or ()


def known_words(words: frozenset[str]) -> frozenset[str]:
    """The words of a set that have senses (:func:`senses` is not empty for exactly these)."""
    return words & _known()


@lru_cache(maxsize=1)
def _known() -> frozenset[str]:
    """Every word :func:`senses` knows: each form, and its plural when longer than three
    letters (a set, so that :func:`known_words` is one intersection)."""
    index = _index()
    return frozenset(index).union(form + "s" for form in index if len(form) + 1 > 3)


def contrast(word_a: str, word_b: str) -> bool:
    """True when some class holds the two (lower-case) words in different senses: opposites
    ("small" / "big") or different members of one kind ("flute" / "guitar").

    Synonyms and inflections of one sense ("big" / "large", "ride" / "riding") never
    contrast, nor do words the lexicon does not know.
    """
    if word_a == word_b:
        return False
    senses_b = senses(word_b)
    if not senses_b:
        return False
    for name, number in senses(word_a):
        same_class = [n for c, n in senses_b if c == name]
        if same_class and number not in same_class:
            return True
    return False
