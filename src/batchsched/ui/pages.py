"""The web UI's pages as HTML, from a board and what its reader may see (docs/ui.md).

Plain HTML that reads without JavaScript; every value from the cluster is escaped. Each page
is a title and the body of its `<main>`, which ui.js replaces in place when the board moves.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape
from urllib.parse import quote

from batchsched.objects.parse import format_time
from batchsched.objects.quantity import PODS, format_amount
from batchsched.ui.access import Viewer
from batchsched.ui.board import Board, NodeView, Preemption, QueueView, Quota, WorkloadView

Page = tuple[str, str]  # title, the body of <main>
_REASON_SHORT = 160  # characters of a reason shown in a list
_CELLS_MAX = 16  # a node with more of the map's resource is drawn as a bar
_QUOTA_COLUMNS = (
    "resource", "usage", "in use", "guaranteed", "nominal", "limit", "fair share", "borrowed"
)  # fmt: skip


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _url(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") for p in parts)


def _head(*names: str) -> str:
    return "<thead><tr>" + "".join(f'<th scope="col">{n}</th>' for n in names) + "</tr></thead>"


def pod_url(key: str) -> str:
    return _url("pods", *key.split("/", 1))


def workload_url(w: WorkloadView) -> str:
    return _url("gangs" if w.kind == "gang" else "pods", w.namespace, w.name)


def queue_url(name: str) -> str:
    return _url("queues", name)


def status_line(board: Board, viewer: Viewer) -> str:
    sees = (
        "all namespaces"
        if viewer.namespaces is None
        else ", ".join(sorted(viewer.namespaces)) or "no namespace's workloads"
    )
    notice = f'<p class="notice" role="alert">{_e(board.notice)}</p>' if board.notice else ""
    return (
        f'<p class="status">{_e(board.source)} as of '
        f'<time datetime="{_e(format_time(board.taken_at))}">{_e(format_time(board.taken_at))}'
        f"</time> · signed in as {_e(viewer.name)}, seeing {_e(sees)}</p>{notice}"
    )


# ---- queues ---------------------------------------------------------------------------


def _bar(q: Quota) -> str:
    """In use against the quotas: a bar scaled to the largest of them, with marks."""
    top = max(q.limit or 0, q.nominal, q.in_use, q.guaranteed, 1)

    def at(amount: int) -> str:
        return f"{min(100.0, 100.0 * amount / top):.1f}%"

    label = (
        f"{q.resource}: {q.text(q.in_use)} in use of nominal {q.text(q.nominal)}, guaranteed "
        f"{q.text(q.guaranteed)}, limit {q.text(q.limit)}"
    )
    over = " over" if q.borrowed else ""
    marks = [f'<span class="mark guaranteed" style="left:{at(q.guaranteed)}"></span>']
    marks.append(f'<span class="mark nominal" style="left:{at(q.nominal)}"></span>')
    marks.append(f'<span class="mark share" style="left:{at(q.fair_share)}"></span>')
    return (
        f'<span class="bar" role="img" aria-label="{_e(label)}">'
        f'<span class="fill{over}" style="width:{at(q.in_use)}"></span>{"".join(marks)}</span>'
    )


def _quota_rows(queue: QueueView) -> str:
    if not queue.quotas:
        return '<tr><td colspan="8">no quota: only its children\'s</td></tr>'
    rows = []
    for q in queue.quotas:
        amounts = (q.in_use, q.guaranteed, q.nominal, q.limit, q.fair_share, q.borrowed)
        cells = zip(
            _QUOTA_COLUMNS[1:],
            (_bar(q), *(_e(q.text(a)) for a in amounts)),
            strict=True,
        )  # fmt: skip
        tds = "".join(f'<td data-label="{label}">{cell}</td>' for label, cell in cells)
        rows.append(f'<tr><th scope="row">{_e(q.resource)}</th>{tds}</tr>')
    return "".join(rows)


def _queue_card(queue: QueueView, board: Board, heading: str) -> str:
    head = _head(*_QUOTA_COLUMNS)
    return (
        f'<section class="queue depth{min(queue.depth, 4)}" aria-label="queue {_e(queue.name)}">'
        f'{heading}<p class="meta">weight {queue.weight:g} · priority {queue.priority} · '
        f"<strong>{queue.pending}</strong> pod(s) pending</p>"
        f'<div class="scroll"><table class="quotas">{head}'
        f"<tbody>{_quota_rows(queue)}</tbody></table></div></section>"
    )


def queues_page(board: Board, viewer: Viewer) -> Page:
    parts = [status_line(board, viewer), "<h1>Queues</h1>"]
    if not board.queues:
        parts.append("<p>No Queue in the cluster: every pod waits in one line.</p>")
    if board.queues:
        parts.append(
            '<p class="legend"><span class="key fill"></span> in use '
            '<span class="key guaranteed"></span> guaranteed '
            '<span class="key nominal"></span> nominal <span class="key share"></span> fair '
            "share; the bar ends at the limit, red when the queue borrows</p>"
        )
    for queue in board.queues:
        link = f'<a href="{_e(queue_url(queue.name))}">{_e(queue.name)}</a>'
        parts.append(_queue_card(queue, board, f"<h2>{link}</h2>"))
    parts.append(_line_summary(board, viewer))
    return "Queues", "".join(parts)


def _line_summary(board: Board, viewer: Viewer) -> str:
    visible = [w for w in board.workloads if viewer.sees(w.namespace)]
    hidden = len(board.workloads) - len(visible)
    items = _workload_items(visible, in_queue=False)
    more = f"<p>{hidden} more in namespaces you cannot see.</p>" if hidden else ""
    order = (
        "<p>Pods in no queue first; then each queue's own line, the next queue chosen by fair "
        "share at each step (<em>queue order</em>), so a place across queues is not fixed.</p>"
        if board.queues
        else ""
    )
    return (
        f"<h2>Waiting ({len(board.workloads)} workload(s))</h2>{order}"
        + (f'<ol class="line">{items}</ol>' if items else "<p>None you can see.</p>")
        + more
    )


def _requests_text(requests: tuple[tuple[str, int], ...]) -> str:
    shown = [f"{r} {format_amount(r, a)}" for r, a in requests if r != PODS]
    return ", ".join(shown) or "nothing"


def _short(text: str) -> str:
    return text if len(text) <= _REASON_SHORT else text[: _REASON_SHORT - 1] + "…"


def _workload_items(workloads: list[WorkloadView], in_queue: bool) -> str:
    """Workloads as list items: numbered in their queue's line (`in_queue`) or the whole."""
    items = []
    for w in workloads:
        where = f" in {_e(w.queue)}" if not in_queue and w.queue else ""
        gang = f" (gang of {len(w.members)}, min {w.min_member})" if w.kind == "gang" else ""
        position = f"#{w.position}"
        if in_queue or not w.position:  # across queues, fair share chooses at each step
            position = (
                f"#{w.queue_position} in {_e(w.queue)}" if not in_queue else f"#{w.queue_position}"
            )
            where = ""
        items.append(
            f'<li><span class="pos">{position}</span> '
            f'<a href="{_e(workload_url(w))}">{_e(w.key)}</a>{gang}{where} · priority '
            f"{w.priority} · {_e(_requests_text(w.requests))}"
            f'<br><span class="reason">{_e(_short(w.reason))}</span></li>'
        )
    return "".join(items)


def queue_page(board: Board, viewer: Viewer, name: str) -> Page | None:
    queue = board.queue(name)
    if queue is None:
        return None
    parent = (
        f'<p>In <a href="{_e(queue_url(queue.parent))}">{_e(queue.parent)}</a>.</p>'
        if queue.parent
        else ""
    )
    own = [w for w in board.workloads if w.queue == name]
    visible = [w for w in own if viewer.sees(w.namespace)]
    hidden = len(own) - len(visible)
    children = [q.name for q in board.queues if q.parent == name]
    kids = (
        "<p>Child queues: "
        + ", ".join(f'<a href="{_e(queue_url(c))}">{_e(c)}</a>' for c in children)
        + ".</p>"
        if children
        else ""
    )
    items = _workload_items(visible, in_queue=True)
    line = f'<ol class="line">{items}</ol>' if items else "<p>No pending workload you can see.</p>"
    more = f"<p>{hidden} more in namespaces you cannot see.</p>" if hidden else ""
    body = (
        status_line(board, viewer)
        + f"<h1>Queue {_e(name)}</h1>{parent}{kids}"
        + _queue_card(queue, board, "")
        + f"<h2>Pending workloads, in the order they are tried ({len(own)})</h2>{line}{more}"
    )
    return f"Queue {name}", body


# ---- a workload ------------------------------------------------------------------------


def workload_page(board: Board, viewer: Viewer, kind: str, key: str) -> Page | None:
    """A pending pod or gang; a pod no longer pending, from its events. None: not found (or
    not visible, which reads the same)."""
    if not viewer.sees_pod(key):
        return None
    w = board.workload(key)
    if w is not None and w.kind != kind:
        w = None
    if w is None and kind == "pod":
        # A member of a pending gang, or a pod that is not pending (any more).
        w = next((x for x in board.workloads if key in x.pods and x.kind == "gang"), None)
        if w is None:
            return _past_pod(board, viewer, key)
    if w is None:
        return None
    label = "Gang" if w.kind == "gang" else "Pod"
    total = len(board.workloads)
    in_queue = sum(1 for x in board.workloads if x.queue == w.queue) if w.queue else 0
    queue = f'<a href="{_e(queue_url(w.queue))}">{_e(w.queue)}</a>' if w.queue else "none"
    position = f"{w.queue_position} of {in_queue} in {queue}" if w.queue else "in no queue"
    overall = f"{w.position} of {total}"
    if not w.position:
        overall = (
            f"{total} waiting; the next queue is chosen by fair share at each step (queue "
            "order), so this workload's place across queues is not fixed"
        )
    if w.expected_start is not None and w.expected_start >= board.taken_at:
        start = _e(format_time(w.expected_start))
    elif w.reservation:
        start = _e(w.reservation)
    else:
        start = "none: no reservation holds room for it (docs/backfill.md)"
    facts = [
        ("Status", "pending"),
        ("Namespace", _e(w.namespace)),
        ("Queue", queue),
        ("Position in its queue", position),
        ("Position overall", overall),
        ("Priority", str(w.priority)),
        ("Requests (pending)", _e(_requests_text(w.requests))),
        ("Expected start", start),
    ]
    if w.room_held:
        facts.append(("Room held", _e(w.room_held)))
    if w.kind == "gang":
        facts.append(("minMember", str(w.min_member)))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    explain = f"batchsched explain {w.pods[0]}"
    body = [
        status_line(board, viewer),
        f"<h1>{label} {_e(w.key)}</h1>",
        f'<dl class="facts">{dl}</dl>',
        '<h2>Why it waits</h2><p class="reason" id="reason">'
        f'{_e(w.reason)}</p><p class="hint">Node by node: <code>{_e(explain)}</code></p>',
    ]
    if w.members:
        rows = "".join(
            f'<tr><td><a href="{_e(pod_url(m.pod))}">{_e(m.pod)}</a></td>'
            f"<td>{_e(m.node) if m.node else 'pending'}</td></tr>"
            for m in w.members
        )
        head = _head("pod", "node")
        body.append(f"<h2>Members</h2><table>{head}<tbody>{rows}</tbody></table>")
    body.append(_events(board, w.pods))
    return f"{label} {w.key}", "".join(body)


def _past_pod(board: Board, viewer: Viewer, key: str) -> Page | None:
    if board.events is None or key not in board.events:
        return None
    body = (
        status_line(board, viewer)
        + f"<h1>Pod {_e(key)}</h1><p>Not pending: its last events follow.</p>"
        + _events(board, (key,))
    )
    return f"Pod {key}", body


def _events(board: Board, pods: tuple[str, ...]) -> str:
    if board.events is None:
        return (
            "<h2>Events</h2><p>Event history is kept by <code>batchsched run</code> (live "
            "mode); a snapshot has none.</p>"
        )
    rows = sorted(
        ((e, pod) for pod in pods for e in board.events.get(pod, ())),
        key=lambda item: (item[0].at, item[1]),
        reverse=True,
    )
    if not rows:
        return "<h2>Events</h2><p>None yet.</p>"
    cells = "".join(
        f'<tr><td><time datetime="{_e(format_time(e.at))}">{_e(format_time(e.at))}</time></td>'
        f"<td>{_e(pod)}</td><td>{_e(e.type)}</td><td>{_e(e.reason)}</td>"
        f"<td>{_e(e.message)}</td></tr>"
        for e, pod in rows
    )
    head = _head("time", "pod", "type", "reason", "message")
    return f'<h2>Events</h2><div class="scroll"><table>{head}<tbody>{cells}</tbody></table></div>'


# ---- nodes ------------------------------------------------------------------------------


def nodes_page(board: Board, viewer: Viewer, by: str) -> Page:
    resource = board.map_resource
    keys = board.domain_keys
    index = keys.index(by) if by in keys else (0 if keys else -1)
    groups: dict[str, list[NodeView]] = defaultdict(list)
    for node in board.nodes:
        groups[node.domains[index] if index >= 0 else ""].append(node)
    used = sum(n.used for n in board.nodes)
    total = sum(n.total for n in board.nodes)
    parts = [
        status_line(board, viewer),
        f"<h1>Nodes: {_e(resource)}</h1>",
        f"<p>{len(board.nodes)} node(s); {_e(format_amount(resource, total - used))} of "
        f"{_e(format_amount(resource, total))} {_e(resource)} free.</p>",
    ]
    if keys:
        options = "".join(
            f'<option value="{_e(k)}"{" selected" if i == index else ""}>{_e(k)}</option>'
            for i, k in enumerate(keys)
        )
        parts.append(
            '<form method="get" action="/nodes" class="by"><label for="by">Group by</label> '
            f'<select id="by" name="by">{options}</select> <button type="submit">Show</button>'
            "</form>"
        )
    parts.append(
        '<p class="legend"><span class="cell used"></span> in use <span class="cell"></span> '
        'free <span class="key reserved"></span> reserved <span class="key cordoned"></span> '
        "unschedulable</p>"
    )
    for domain in sorted(groups):
        nodes = groups[domain]
        free = sum(n.total - n.used for n in nodes)
        name = domain or ("no " + keys[index] if index >= 0 else "all nodes")
        parts.append(
            f'<section class="domain" aria-label="{_e(name)}"><h2>{_e(name)} '
            f'<span class="meta">{len(nodes)} node(s), '
            f"{_e(format_amount(resource, free))} free</span></h2>"
            f'<ul class="nodes">{"".join(_node(n, resource, viewer) for n in nodes)}</ul>'
            "</section>"
        )
    return "Nodes", "".join(parts)


def _node(node: NodeView, resource: str, viewer: Viewer) -> str:
    free = node.total - node.used
    classes = ["node"]
    notes = []
    details = []  # Backfill's reservations here, each when and which room: in the label only
    if node.reserved_for:
        classes.append("reserved")
        who = node.reserved_for if viewer.sees_pod(node.reserved_for) else "a pod"
        notes.append(f"reserved for {who}")
        for holder, when in node.held:
            who = holder if viewer.sees_pod(holder) else "a pod"
            details.append(f"; {who} holds {when}")
    if node.unschedulable:
        classes.append("cordoned")
        notes.append("unschedulable")
    label = (
        f"{node.name}: {format_amount(resource, node.used)} of "
        f"{format_amount(resource, node.total)} {resource} in use"
        + "".join(f", {n}" for n in notes)
        + "".join(details)
    )
    if 0 < node.total <= _CELLS_MAX and resource != "cpu":
        cells = '<span class="cell used"></span>' * node.used + '<span class="cell"></span>' * free
        drawing = f'<span class="cells">{cells}</span>'
    else:
        width = 100.0 * node.used / node.total if node.total else 0.0
        drawing = f'<span class="bar"><span class="fill" style="width:{width:.1f}%"></span></span>'
    note = f'<span class="note">{_e(", ".join(notes))}</span>' if notes else ""
    return (
        f'<li class="{" ".join(classes)}" title="{_e(label)}" aria-label="{_e(label)}">'
        f'<span class="name">{_e(node.name)}</span>{drawing}'
        f'<span class="count">{_e(format_amount(resource, free))} free</span>{note}</li>'
    )


# ---- preemptions ----------------------------------------------------------------------


def preemptions_page(board: Board, viewer: Viewer) -> Page:
    parts = [status_line(board, viewer), "<h1>Preemptions and reclaims</h1>"]
    if not board.preemptions:
        none = "none in the plan" if board.events is None else "none since the scheduler started"
        parts.append(f"<p>No preemption yet ({none}).</p>")
        return "Preemptions", "".join(parts)

    hidden = "a pod in a namespace you cannot see"

    def pod(key: str, queue: str) -> str:
        name = _e(key) if viewer.sees_pod(key) else hidden
        return name + (f' <span class="meta">({_e(queue)})</span>' if queue else "")

    def rule(p: Preemption) -> str:
        """The rule's text, without the names of pods the reader may not see."""
        text = p.rule
        for key in (p.victim, p.preemptor):
            if not viewer.sees_pod(key):
                text = text.replace(key, hidden)
        return _e(text)

    rows = "".join(
        f'<tr><td><time datetime="{_e(format_time(p.at))}">{_e(format_time(p.at))}</time></td>'
        f"<td>{'reclaim' if p.reclaim else 'preemption'}</td>"
        f"<td>{pod(p.victim, p.victim_queue)}</td><td>{pod(p.preemptor, p.preemptor_queue)}</td>"
        f"<td>{_e(p.node)}</td><td>{rule(p)}</td></tr>"
        for p in board.preemptions
    )
    head = _head("time", "kind", "victim", "preemptor", "node", "rule")
    parts.append(
        f'<div class="scroll"><table class="preemptions">{head}<tbody>{rows}</tbody></table></div>'
    )
    return "Preemptions", "".join(parts)
