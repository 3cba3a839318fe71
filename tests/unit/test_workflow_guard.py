"""Model-written graph.py / prompt.py are refused before anything in them runs (aflow_rl.restricted).

Each case is code an optimizer LLM could write to act on the evaluator's machine: top-level statements,
imports, the interpreter's internals, format-string attribute walks, unbounded loops, amplification.
The canary file shows that nothing ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aflow_rl.workflow import load_workflow_class, validate

PROMPT = 'SOLVE_PROMPT = "Solve it."\n'
HEAD = "from aflow_rl import operators as operator\nfrom aflow_rl.llm import create_llm_instance\nimport prompt as prompt_custom\n\n"
METHODS = """class Workflow:
    def __init__(self, name, llm_config, dataset):
        self.llm = create_llm_instance(llm_config)
        self.custom = operator.Custom(self.llm)

    async def __call__(self, problem: str):
{body}
"""


def graph(body: str, head: str = HEAD) -> str:
    return head + METHODS.format(body="".join(f"        {line}\n" for line in body.splitlines()))


def hostile_graphs(canary: Path) -> dict[str, tuple[str, str]]:
    touch = f"open({str(canary)!r}, 'w').write('ran')"
    ok_body = 'return (await self.custom(input=problem, instruction=prompt_custom.SOLVE_PROMPT))["response"], 0.0'
    return {
        "top-level os.system": (f"import os\nos.system('touch {canary}')\n" + graph(ok_body), PROMPT),
        "top-level open": (HEAD + touch + "\n" + METHODS.format(body="        return '', 0.0"), PROMPT),
        "prompt.py code": (graph(ok_body), f"import os\nos.system('touch {canary}')\nSOLVE_PROMPT = 'x'\n"),
        "prompt.py computed constant": (graph(ok_body), f"SOLVE_PROMPT = {touch}\n"),
        "dunder walk": (graph("cls = ().__class__.__bases__[0].__subclasses__()\nreturn str(cls), 0.0"), PROMPT),
        "builtins via globals": (graph("g = __builtins__\nreturn str(g), 0.0"), PROMPT),
        "import in a method": (graph("import os\nos.system('true')\nreturn '', 0.0"), PROMPT),
        "format walk in prompt": (graph(ok_body), 'SOLVE_PROMPT = "{input.__class__.__init__.__globals__}"\n'),
        "format on model output": (
            graph(
                'text = (await self.custom(input=problem, instruction="x"))["response"]\nreturn text.format(self), 0.0'
            ),
            PROMPT,
        ),
        "while loop": (graph("while True:\n    pass\nreturn '', 0.0"), PROMPT),
        "huge range": (graph("for i in range(10**9):\n    pass\nreturn '', 0.0"), PROMPT),
        "string amplification": (graph("s = 'a' * 1000\nreturn s * 1000, 0.0"), PROMPT),
        "lambda": (graph("f = lambda: 1\nreturn f(), 0.0"), PROMPT),
        "try/except swallowing": (graph("try:\n    x = 1\nexcept Exception:\n    pass\nreturn '', 0.0"), PROMPT),
        "second class": (graph(ok_body) + "\nclass Evil(Exception):\n    pass\n", PROMPT),
        "os import": (graph(ok_body, head="import os\n" + HEAD), PROMPT),
    }


@pytest.mark.parametrize("case", list(hostile_graphs(Path("/x"))))
def test_hostile_workflow_code_is_refused_before_it_runs(case, tmp_path):
    canary = tmp_path / "canary"
    graph_src, prompt_src = hostile_graphs(canary)[case]
    assert not validate(graph_src, prompt_src).ok, case
    with pytest.raises(ValueError, match="workflow refused"):
        load_workflow_class(graph_src, prompt_src)
    assert not canary.exists()


def test_runtime_builtins_are_an_allow_list():
    # `dir` passes the static check as a name and fails at run time: only SAFE_BUILTINS are there.
    src = (
        HEAD + "class Workflow:\n    def __init__(self, name, llm_config, dataset):\n        self.name = name\n\n"
        "    async def __call__(self, problem: str):\n        return str(dir(self)), 0.0\n"
    )
    cls = load_workflow_class(src, PROMPT)
    import asyncio

    wf = cls(name="x", llm_config=None, dataset="X")
    with pytest.raises(NameError):
        asyncio.run(wf("problem"))


def test_asyncio_gather_and_re_are_available_through_narrow_faces():
    head = "import asyncio\nimport re\n" + HEAD
    ok = graph(
        'outs = await asyncio.gather(*[self.custom(input=problem, instruction="x") for _ in range(3)])\n'
        'm = re.search(r"\\d+", outs[0]["response"])\nreturn m.group(0), 0.0',
        head=head,
    )
    assert validate(ok, PROMPT).ok
    load_workflow_class(ok, PROMPT)
    escape = graph("loop = asyncio.get_event_loop()\nreturn str(loop), 0.0", head=head)
    cls = load_workflow_class(escape, PROMPT)  # passes the static check; the face has no get_event_loop
    import asyncio

    wf = cls.__new__(cls)
    with pytest.raises(AttributeError):
        asyncio.run(cls.__call__(wf, "p"))


def test_a_normal_aflow_graph_still_loads():
    src = graph(
        'parts = [p.strip() for p in problem.split(",")]\n'
        'text = f"{prompt_custom.SOLVE_PROMPT} {len(parts)}"\n'
        "for i in range(3):\n    text += str(i)\n"
        'return (await self.custom(input=problem, instruction=text))["response"], 0.0'
    )
    assert validate(src, PROMPT).ok
    assert load_workflow_class(src, PROMPT).__name__ == "Workflow"


def test_the_sandboxed_host_gives_workflows_the_same_builtins_as_the_in_process_check():
    import ast

    from aflow_rl import restricted

    host = Path(restricted.__file__).parent / "sandboxed" / "workflow_host.py"
    (node,) = [
        n
        for n in ast.parse(host.read_text()).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "BUILTINS"
    ]
    names = node.value.args[0].func.value.value.split()  # BUILTINS = tuple("...".split())
    assert set(names) == set(restricted.SAFE_BUILTINS)
