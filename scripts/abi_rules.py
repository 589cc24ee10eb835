"""How scripts/abi-json.py reads the header's doc comments: the rules of the
header's "Conventions" block, applied to each declaration. Each fact comes
from the function's own comment (or its section's, or its callback type's);
where a rule needs a statement and the comment has none, a problem is
recorded instead of a guess."""
import re

# The header's conventions, as the description states them for readers.
CONVENTIONS = {
    "status": "int32_t functions with an `err` parameter return APPNORTH_OK (0) or an APPNORTH_E_* code; "
              "appnorth_status_str() names a code",
    "err": "the last parameter, appnorth_error *err, is optional and always written when given",
    "strings_in": "input strings are NUL-terminated UTF-8, borrowed for the call; the library copies what it keeps",
    "strings_out": "strings returned through char **out_* belong to the caller, who frees them with "
                   "appnorth_string_free() (the only way: never the host's free()); on failure the "
                   "out-parameter is NULL",
    "static_strings": "const char * return values are static: never free them",
    "pointers": "a pointer argument is required (NULL is APPNORTH_E_INVALID_ARGUMENT) unless its "
                "function's comment says it may be NULL, is optional, or what NULL means",
    "free": "handles are released by their _free function; passing NULL to it does nothing",
    "threads": "every function may be called from any thread unless its handle or comment says "
               "'Not thread-safe'",
    "blocking": "a call blocks (network, disk beyond one write, another thread, a timeout) only when "
                "its comment says it blocks or waits",
    "callbacks": "every callback's thread and lifetime is stated; callbacks never run while the "
                 "library holds an internal lock",
}

BLOCKS = re.compile(r"[^.]*\b(?:Blocks|blocks|block the calling thread|waits for|waited for|joins|wait up to|"
                    r"Flush for up to)\b[^.]*\.?")
SECTION_BLOCKS = re.compile(r"[^.]*\bEach call blocks\b[^.]*\.?")
NEVER_BLOCKS = re.compile(r"\b(?:[Nn]ever blocks|Returns at once|[Nn]o network traffic happens)\b")
LIFETIME = re.compile(r"[^.]*\b(?:called exactly once|keep `?fn`?|keep\w* [^.]*valid until|valid until|kept until|keeps? (?:them|the callbacks|load)|"
                      r"before the call returns|during the call|until the listener is removed)\b[^.]*\.?")

TYPE_LIFETIME = re.compile(r"[^.]*\b(?:called exactly once|keeps? [^.]*valid until)\b[^.]*\.?")


def sentence(pattern, text):
    match = pattern.search(text)
    return " ".join(match.group(0).split()).strip() if match else None


def nullable_in(name, text):
    """Whether the comment says that argument `name` may be NULL."""
    n = rf"`?{name}`?"
    listed = rf"(?:\b\w+, )*{n}(?:, \w+)*"
    patterns = [
        rf"\b{n}\s*\(optional\)",
        rf"\b{listed}:\s*(?:optional|may be NULL|NULL\b)",
        rf"\b{n}[^.;]{{0,40}}?\b(?:may|can) be NULL",
        rf"\bNULL\s+{n}(?!\w)",
        rf"\bwhen {n} is NULL",
        rf"\b{n}\s*\([^)]*\bNULL\b",
        rf"\b(?:[Bb]oth|[Ee]ither) NULL\b[^.]*\b{name}\b|\b{listed}: both NULL",
    ]
    return any(re.search(p, text) for p in patterns)


def required_in(name, text):
    return bool(re.search(rf"\b(?:\w+, )*`?{name}`?(?:, \w+)*:\s*required", text))


def callback_facts(name, doc, section_doc, problems):
    thread = sentence(re.compile(r"[^.]*\b(?:[Tt]hread|THREAD)\b[^.]*\.?"), doc)
    stated_in_section = bool(thread and re.search(r"\bsee\b", thread))  # "Thread: see <the section> above"
    if stated_in_section:
        thread = sentence(re.compile(r"[^.]*\bruns on\b[^.]*\.?"), section_doc) or thread
    if not thread:
        problems.append(f"callback type {name}: its comment does not say which thread it runs on")
    facts = {"thread": thread}
    # Where it runs for a client in dispatch mode (appnorth_dispatch()).
    in_dispatch = re.compile(r"[^.]*\b(?:Dispatch mode|[Ii]n dispatch mode)\b[^.]*\.?")
    dispatch = sentence(in_dispatch, doc) or (sentence(in_dispatch, section_doc) if stated_in_section else None)
    if thread and re.search(r"\bboth modes\b", thread):
        dispatch = thread
    if dispatch:
        facts["thread_in_dispatch_mode"] = dispatch
    # A lifetime stated with the type (or its section) holds wherever it is used.
    lifetime = sentence(TYPE_LIFETIME, doc) or sentence(TYPE_LIFETIME, section_doc)
    if lifetime:
        facts["lifetime"] = lifetime
    return facts


def param_kind(param, handles, callbacks):
    t, name = param["type"], param["name"]
    base = t.replace("const ", "").replace(" *", "").replace("*", "").strip()
    if t == "appnorth_error *" and name == "err":
        return "error"
    if t == "appnorth_error *":
        return "error_out"
    if t == "const char *":
        return "string"
    if t == "char **":
        return "string_out"
    if t == "const void *":
        return "bytes"
    if t == "void *":
        return "user_data"
    if base in callbacks:
        return "callback"
    if t.endswith("**") and base in handles:
        return "handle_out"
    if base in handles:
        return "handle"
    if t in ("int32_t *", "int64_t *", "uint64_t *", "double *"):
        return "value_out"
    if "*" not in t:
        return "value"
    return "pointer"


def function_facts(function, api, callbacks, problems):
    handles = {h["name"]: h for h in api["handles"]}
    callback_types = {c["name"]: c for c in api["callbacks"]}
    name, doc = function["name"], function["doc"]
    section_doc = function.pop("section_doc", "")
    where = f"{name}()"
    for param in function["params"]:
        kind = param["kind"] = param_kind(param, handles, callbacks)
        pname = param["name"]
        if kind == "value":
            continue
        if kind in ("error", "user_data"):
            param["nullable"] = True
        elif name.endswith("_free") and param is function["params"][0]:
            param["nullable"] = True  # "NULL is a no-op", for every _free function
        elif pname == "idempotency_key":
            param["nullable"] = True  # the write section: NULL makes a random key
        else:
            param["nullable"] = (nullable_in(pname, doc) or nullable_in(pname, section_doc)) and not required_in(pname, doc)
        if kind == "string":
            param["ownership"] = "borrowed for the call; the library copies what it keeps"
        elif kind == "string_out":
            param["ownership"] = "caller"
            param["free_with"] = "appnorth_string_free"
        elif kind == "handle_out":
            base = param["type"].replace("**", "").strip()
            param["ownership"] = "caller"
            param["free_with"] = handles[base]["free_with"]
            if not param["free_with"]:
                problems.append(f"{where}: {pname} returns a {base} but no {base}_free exists")
        elif kind == "user_data":
            param["ownership"] = "host; passed back to the callbacks unchanged, never read"
        elif kind == "callback":
            param["callback_type"] = param["type"]
    returns = function["return"]
    rtype = returns["type"]
    if rtype == "const char *":
        if re.search(r"\bstatic string\b", doc):
            returns["ownership"] = "static"
            returns["free_with"] = None
            returns["nullable"] = False  # a static string is always there
        else:
            problems.append(f"{where}: returns const char * but its comment does not say it is static")
    elif rtype.endswith("*"):
        base = rtype.replace("*", "").strip()
        returns["ownership"] = "caller"
        returns["free_with"] = handles.get(base, {}).get("free_with")
        returns["nullable"] = bool(re.search(r"Returns NULL\b|NULL only if", doc))
        if not returns["free_with"]:
            problems.append(f"{where}: returns {rtype} without a _free function for it")
    elif rtype == "int32_t":
        returns["meaning"] = "status" if any(p["kind"] == "error" for p in function["params"]) else "value"
    # Threads: a handle whose type is not thread-safe makes its functions so.
    first = function["params"][0] if function["params"] else None
    first_handle = handles.get(first["type"].replace("const ", "").replace("*", "").strip()) if first else None
    if re.search(r"\bOnly valid inside that callback\b", doc):
        function["thread"] = "inside the callback that received the buffer, on its thread"
    elif re.search(r"\bNot thread-safe\b", doc) or (first_handle and not first_handle["thread_safe"]
                                                     and not first["type"].startswith("const ")
                                                     and not name.endswith("_free")):
        function["thread"] = "one thread at a time (the handle is not thread-safe)"
    else:
        function["thread"] = "any"
    # Blocking.
    blocks = sentence(BLOCKS, doc) or sentence(SECTION_BLOCKS, section_doc)
    if blocks and re.fullmatch(r".*\b[Nn]ever blocks\b.*", blocks) and not re.search(r"\bwaits\b", blocks):
        blocks = None
    function["blocks"] = bool(blocks)
    if blocks:
        function["blocks_note"] = blocks
    elif NEVER_BLOCKS.search(doc):
        function["blocks_note"] = sentence(re.compile(r"[^.]*" + NEVER_BLOCKS.pattern + r"[^.]*\.?"), doc)
    # Callbacks: which thread, and how long the library keeps the pointer.
    for param in function["params"]:
        if param["kind"] != "callback":
            continue
        # The function's comment, or its section's (a rule stated once for
        # every function of the section, such as the non-blocking calls').
        lifetime = (sentence(LIFETIME, doc) or sentence(LIFETIME, section_doc)
                    or callback_types[param["type"]].get("lifetime"))
        if not lifetime:
            problems.append(f"{where}: takes {param['name']} but its comment does not say how long the library "
                            f"keeps it (until when the host must keep it and its user_data valid)")
        param["lifetime"] = lifetime


def inherit_from_blocking(api):
    """An X_async function "takes the blocking call's arguments, checked the
    same way" (the header's non-blocking section): each argument it shares
    with X by name has X's nullability unless its own comment says more."""
    by_name = {f["name"]: f for f in api["functions"]}
    for function in api["functions"]:
        blocking = by_name.get(function["name"][:-len("_async")]) if function["name"].endswith("_async") else None
        if not blocking:
            continue
        shared = {p["name"]: p for p in blocking["params"]}
        for param in function["params"]:
            if param["name"] == "out_op":  # "*out_op (optional) receives its id", for every start call
                param["nullable"] = True
            other = shared.get(param["name"])
            if other and "nullable" in other and not nullable_in(param["name"], function["doc"]):
                param["nullable"] = other["nullable"]
