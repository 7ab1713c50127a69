"""The stamp generators write beside what they make: a hash of their sources, torch's version and
any other tool versions that change the output. When the stamp still matches, nothing is made again."""
import hashlib


def sources_hash(paths, extra=()):
    from importlib import metadata

    h = hashlib.sha256()
    try:
        h.update(metadata.version("torch").encode())
    except metadata.PackageNotFoundError:
        pass  # the generator's torch import then says what is missing
    for v in extra:
        h.update(v.encode())
    for path in paths:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()
