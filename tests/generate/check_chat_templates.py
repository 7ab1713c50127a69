#!/usr/bin/env python3
"""mminfer's Jinja subset (src/generate/jinja_*) against Debian's python3-jinja2 set up as
transformers renders chat templates (trim_blocks, lstrip_blocks, raise_exception, its tojson):
every template under chat_templates/ (Idefics3/SmolVLM, ChatML, LLaMA-3, Gemma and one laid out
over lines with tools) with every conversation of conversations.json must render to the same text,
or fail in both (raise_exception's message the same). Constructs outside the subset get one error
line naming them.

    check_chat_templates.py --render BIN --work DIR"""
import argparse
import glob
import json
import os
import subprocess
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import Checks  # noqa: E402

check = Checks()
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_templates")


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def reference(source, context):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    try:
        return True, env.from_string(source).render(**context)
    except Raised as e:
        return False, str(e)
    except jinja2.exceptions.TemplateError as e:
        return False, None
    except TypeError:
        return False, None


def render(binary, template, context, work):
    path = os.path.join(work, "context.json")
    with open(path, "w") as f:
        json.dump(context, f, ensure_ascii=False)
    p = subprocess.run([binary, template, path], capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8").strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    data = json.load(open(os.path.join(HERE, "conversations.json")))
    for template in sorted(glob.glob(os.path.join(HERE, "*.jinja"))):
        source = open(template).read()
        for conv in data["conversations"]:
            context = {"messages": conv["messages"], "add_generation_prompt": conv["add_generation_prompt"],
                       "bos_token": data["bos_token"], "eos_token": data["eos_token"]}
            if "tools" in conv:
                context["tools"] = conv["tools"]
            ok, want = reference(source, context)
            rc, got, err = render(a.render, template, context, a.work)
            name = f"{os.path.basename(template)} / {conv['name']}"
            if ok:
                check(rc == 0 and got == want, f"{name}: {len(want)} characters as jinja2"
                      + ("" if rc == 0 and got == want else f"\n  jinja2: {want!r}\n  mminfer: {got!r} {err}"))
            else:
                lines = err.splitlines()
                same = want is None or (lines and lines[0] == "chat template: " + want)
                check(rc == 1 and len(lines) == 1 and same, f"{name}: fails as in jinja2 ({err[:120]})")

    # Outside the subset: one line naming the construct.
    for source, words in [("{% macro m() %}x{% endmacro %}", "macro"), ("{{ x | wordwrap }}", "wordwrap"),
                          ("{% for x in y %}", "endfor"), ("{{ 2 ** 3 }}", "**"), ("{{ {'a': 1} }}", "dict literals"),
                          ("{{ ns.x }}{% set ns.x = 1 %}", "namespace"), ("{{ 'a' is divisibleby(2) }}", "divisibleby"),
                          ("{{ namespace(a=1) }}", "namespace()"), ("{{ x", "not closed")]:
        path = os.path.join(a.work, "bad.jinja")
        open(path, "w").write(source)
        rc, got, err = render(a.render, path, {"y": [], "x": 1, "ns": {}}, a.work)
        check(rc == 1 and len(err.splitlines()) == 1 and words in err, f"{source!r}: {err}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
