"""An MCP host nobody here wrote: the official Python SDK (`mcp` on PyPI) drives
`advisor-consult mcp` as Claude Code or Codex would, over standard input and output.

Run by `tests/integration/mcp.rs` (`python_sdk_host_drives_the_server`), which builds the world (a
temporary root whose catalogue has two scripted advisors, a socket, a data directory) and
passes it as a JSON file: python host.py CONFIG. Each scenario asserts what it checks;
the last line printed is a JSON summary the Rust test reads.

The advisors are shell scripts that read `<dir>/mode` on each run: `fast` (both answer
quickly, one supports and one opposes), `split` (the first quickly, the second after
several seconds), `hang` (neither answers).
"""

import json
import os
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

BOUND = 60.0


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def set_mode(config, mode):
    with open(os.path.join(config["dir"], "mode"), "w") as f:
        f.write(mode)


def pids(config):
    found = []
    for advisor in config["advisors"]:
        path = os.path.join(config["dir"], f"pids-{advisor}")
        if os.path.exists(path):
            with open(path) as f:
                found += [int(line) for line in f.read().split()]
    return found


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited: only its parent has not reaped it yet.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


ASSESSMENT = {
    "subject": "Use SQLite for the job queue",
    "materiality": "critical",
    "hypothesis": "WAL mode is enough for one writer",
    "evidence": [{"kind": "file", "ref": "src/queue.rs", "showed": "one writer"}],
}


async def scenario(config):
    summary = {}
    params = StdioServerParameters(
        command=config["command"],
        args=config["args"],
        env=config["env"],
        cwd=config["root"],
    )
    with open(os.path.join(config["dir"], "server.log"), "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                # initialize, then tools/list: eight tools, flat input schemas.
                started = time.monotonic()
                init = await session.initialize()
                summary["initialize_ms"] = round((time.monotonic() - started) * 1000, 1)
                check(init.capabilities.tools is not None, "tools capability")
                check(init.capabilities.resources is not None, "resources capability")
                tools = await session.list_tools()
                names = [t.name for t in tools.tools]
                check(
                    names == ["advisors", "plan", "record", "consult", "job", "cancel", "status", "explain"],
                    f"tool names: {names}",
                )
                listing = json.dumps(tools.model_dump(by_alias=True, exclude_none=True, mode="json"))
                summary["tools_list_bytes"] = len(listing.encode())
                for banned in ('"$ref"', '"anyOf"', '"oneOf"', '"allOf"', '"default"'):
                    for t in tools.tools:
                        check(banned not in json.dumps(t.input_schema), f"{t.name} has {banned}")
                for t in tools.tools:
                    check(t.output_schema is not None, f"{t.name} has no output schema")
                    read_only = t.annotations.read_only_hint if t.annotations else None
                    expected = t.name in ("advisors", "plan", "job", "status", "explain")
                    check(read_only == expected, f"{t.name} readOnlyHint {read_only}")

                # record: an assessment through the writer.
                recorded = await session.call_tool("record", {"record": {"kind": "assessment", **ASSESSMENT}})
                check(not recorded.is_error, f"record failed: {recorded.content}")
                assessment = recorded.structured_content["id"]
                check(recorded.structured_content["kind"] == "assessment", "the stored kind")
                check(json.loads(recorded.content[0].text) == recorded.structured_content, "text mirror")

                # A refusal is a tool error carrying its reason code.
                refused = await session.call_tool(
                    "record",
                    {"record": {"kind": "assessment", "subject": "x", "materiality": "high", "hypothesis": "h"}},
                )
                check(refused.is_error, "a refusal is a tool error")
                # No structured content on an error: it would fail the tool's output schema
                # in SDKs that check every result. The message and its JSON are the text.
                check(refused.structured_content is None, str(refused.structured_content))
                check("refused (material_without_evidence)" in refused.content[0].text, refused.content[0].text)
                check(json.loads(refused.content[1].text)["reason"] == "material_without_evidence", refused.content[1].text)

                # An argument a host adds to every tool (Gemini CLI's) never breaks a call.
                added = await session.call_tool("status", {"wait_for_previous": True})
                check(not added.is_error, f"a host's own argument broke the call: {added.content}")

                # An unknown record is the caller's mistake, not the server's.
                try:
                    await session.read_resource("advisord://record/01NOPE")
                    check(False, "an unknown record is an error")
                except MCPError as e:
                    check(e.error.code == -32002, f"unknown record: {e.error.code} {e}")

                # plan: a preview selecting both advisors.
                plan = await session.call_tool("plan", {"materiality": "critical"})
                check(not plan.is_error, f"plan failed: {plan.content}")
                selected = [s["advisor"] for s in plan.structured_content["selected"]]
                check(selected == config["advisors"], f"selected {selected}")

                # consult: two advisors that disagree; outcomes, disagreement, progress.
                set_mode(config, "fast")
                progress = []

                async def on_progress(value, total, message):
                    progress.append((value, message))

                consulted = await session.call_tool(
                    "consult", {"assessment": assessment}, progress_callback=on_progress
                )
                check(not consulted.is_error, f"consult failed: {consulted.content}")
                job = consulted.structured_content
                check(job["state"] == "done", f"state {job['state']}")
                outcomes = {c["advisor"]: c for c in job["consultations"]}
                check(set(outcomes) == set(config["advisors"]), f"advisors {list(outcomes)}")
                for c in job["consultations"]:
                    check(c["status"] == "completed", f"{c['advisor']}: {c['status']}")
                    check(c["conclusion"], f"{c['advisor']} has no conclusion")
                    check(c["record"], f"{c['advisor']} has no record id")
                    check(c["falsifiers"], f"{c['advisor']} has no falsifiers")
                stances = sorted(c["stance"] for c in job["consultations"])
                check(stances == ["opposes", "supports"], f"stances {stances}")
                detail = job["disagreement_detail"]
                check(detail is not None and detail["id"] == job["disagreement"], "the disagreement")
                check(detail["discriminating_question"], "a discriminating question")
                sources = {p["advisor"] for p in detail["positions"]}
                check("executor" in sources, f"positions {sources}")
                check(len(progress) >= 5, f"progress notifications: {progress}")
                values = [v for v, _ in progress]
                check(values == sorted(values) and len(set(values)) == len(values), f"progress increases: {values}")
                check(any("asked" in (m or "") for _, m in progress), f"messages {progress}")
                summary["progress_notifications"] = len(progress)
                summary["consult_job"] = job["id"]

                # The same job through `job`, at once: the same outcomes.
                again = await session.call_tool("job", {"id": job["id"]})
                check(again.structured_content == job, "job returns the consult's outcomes")

                # A cancel mid-consult: the advisors' processes are gone.
                set_mode(config, "hang")
                before = set(pids(config))
                queued = []

                async def on_hang_progress(value, total, message):
                    queued.append(message or "")

                async with anyio.create_task_group() as group:

                    async def call():
                        await session.call_tool("consult", {"assessment": assessment}, progress_callback=on_hang_progress)

                    group.start_soon(call)
                    with anyio.fail_after(BOUND):
                        while sum("asked" in m for m in queued) < len(config["advisors"]):
                            await anyio.sleep(0.02)
                        new = set(pids(config)) - before
                        while len(new) < len(config["advisors"]):
                            await anyio.sleep(0.02)
                            new = set(pids(config)) - before
                    check(all(alive(p) for p in new), "the advisors run")
                    group.cancel_scope.cancel()
                job_id = queued[0].split()[1]
                with anyio.fail_after(BOUND):
                    while True:
                        state = (await session.call_tool("job", {"id": job_id})).structured_content
                        if state["state"] != "running":
                            break
                        await anyio.sleep(0.05)
                check(state["state"] == "cancelled", f"cancelled job state {state['state']}")
                with anyio.fail_after(BOUND):
                    while any(alive(p) for p in new):
                        await anyio.sleep(0.05)
                summary["cancelled_job"] = job_id
                summary["cancelled_pids"] = sorted(new)

                # The cap: the first advisor's outcome comes back, the job goes on, and
                # `job` with wait collects the rest.
                set_mode(config, "split")
                before_cap = []
                after_cap = []

                async def on_cap_progress(value, total, message):
                    before_cap.append(message or "")

                async def on_collect_progress(value, total, message):
                    after_cap.append(message or "")

                capped = await session.call_tool(
                    "consult", {"assessment": assessment}, progress_callback=on_cap_progress
                )
                first = capped.structured_content
                check(not capped.is_error, f"capped consult failed: {capped.content}")
                check(first["state"] == "running", f"at the cap the job runs: {first['state']}")
                check(first["consultations"][0]["status"] == "completed", f"first outcome {first['consultations'][0]}")
                check(first["consultations"][0]["conclusion"], "the first conclusion at the cap")
                check(first["consultations"][1]["status"] in ("pending", "running"), "the second is not in yet")
                collected = first
                with anyio.fail_after(BOUND):
                    while collected["state"] == "running":
                        collected = (
                            await session.call_tool(
                                "job", {"id": first["id"], "wait": True}, progress_callback=on_collect_progress
                            )
                        ).structured_content
                check(collected["state"] == "done", f"collected {collected['state']}")
                # `job` with wait sends only the events the host has not been sent.
                replayed = [m for m in after_cap if m in before_cap]
                check(not replayed, f"events sent again: {replayed} (before: {before_cap})")
                check(any(m == "job done" for m in after_cap), f"the end is sent: {after_cap}")
                check(all(c["status"] == "completed" for c in collected["consultations"]), "every outcome collected")

                # Resources, read-only, under one scheme with templates.
                resources = await session.list_resources()
                uris = [str(r.uri) for r in resources.resources]
                check(uris == ["advisord://advisors", "advisord://status"], f"resources {uris}")
                templates = await session.list_resource_templates()
                check(
                    [t.uri_template for t in templates.resource_templates]
                    == ["advisord://status/{task}", "advisord://record/{id}", "advisord://job/{id}"],
                    "templates",
                )
                read = lambda uri: session.read_resource(uri)
                advisors = json.loads((await read("advisord://advisors")).contents[0].text)
                check([a["id"] for a in advisors["advisors"]] == config["advisors"], "advisors resource")
                status = json.loads((await read("advisord://status")).contents[0].text)
                check(status["assessments"][0]["id"] == assessment, "status resource")
                record = json.loads((await read(f"advisord://record/{assessment}")).contents[0].text)
                check(record["asked"]["id"] == assessment, "record resource")
                job_resource = json.loads((await read(f"advisord://job/{job['id']}")).contents[0].text)
                check(job_resource == job, "job resource is the consult's outcomes")
                try:
                    await read("advisord://nothing")
                    check(False, "an unknown resource is an error")
                except MCPError as e:
                    check("accepted: advisord://advisors" in str(e), str(e))
    return summary


def main():
    with open(sys.argv[1]) as f:
        config = json.load(f)
    summary = anyio.run(scenario, config)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
