import { useState } from "preact/hooks";
import { api, enc } from "../api.js";
import { usePoll } from "../poll.js";
import { JsonView } from "../json.jsx";
import { Chart } from "../charts.jsx";
import { explain } from "../lifecycle.js";

const EMPTY = { reason: "", operatorName: "", from: "", to: "", filter: "", replayed: "" };
const idOf = (record) => JSON.stringify(record._id);
const iso = (local) => (local ? new Date(local).toISOString() : "");

// The document's own fields before the ones the stream added (_stream_meta, _ts).
function ownFieldsFirst(doc) {
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) return doc ?? null;
  const added = ["_stream_meta", "_ts"];
  const own = Object.entries(doc).filter(([k]) => !added.includes(k));
  return Object.fromEntries([...own, ...Object.entries(doc).filter(([k]) => added.includes(k))]);
}

// Listed records per minute of dlqTime, one series per reason.
function overTime(records) {
  const minute = (r) => Math.floor(Date.parse((r.dlqTime && r.dlqTime.$date) || r.dlqTime) / 60000) * 60;
  const reasons = [...new Set(records.map((r) => (r.errInfo && r.errInfo.reason) || "(none)"))];
  const times = [...new Set(records.map(minute).filter((t) => !Number.isNaN(t)))].sort((a, b) => a - b);
  const series = reasons.map((reason) => ({
    label: reason.length > 40 ? `${reason.slice(0, 40)}…` : reason,
    values: times.map(
      (t) => records.filter((r) => minute(r) === t && ((r.errInfo && r.errInfo.reason) || "(none)") === reason).length,
    ),
  }));
  return { times, series };
}

function counts(records, key) {
  const out = new Map();
  for (const r of records) {
    const k = key(r) || "(none)";
    out.set(k, (out.get(k) || 0) + 1);
  }
  return [...out.entries()].sort((a, b) => b[1] - a[1]);
}

// The list's filters as the replay body expects them (all optional).
function replayFilters(f) {
  const body = {};
  if (f.reason) body.reason = f.reason;
  if (f.operatorName) body.operatorName = f.operatorName;
  if (f.from) body.from = iso(f.from);
  if (f.to) body.to = iso(f.to);
  if (f.filter) body.filter = JSON.parse(f.filter);
  return body;
}

function Replay({ name, filters, processors, single, onDone }) {
  const [kind, setKind] = useState("processor");
  const [target, setTarget] = useState("");
  const [dryRun, setDryRun] = useState(false);
  const [result, setResult] = useState(null);
  const run = async () => {
    try {
      const scope = single ? { filter: { _id: single._id } } : replayFilters(filters);
      const body = {
        ...scope,
        target: kind === "processor" ? { processor: target } : { connectionName: target },
        dryRun,
      };
      const r = await api(`/processors/${enc(name)}/dlq:replay`, { method: "POST", body });
      const odd = r.notReplayable ? `, ${r.notReplayable} not replayable (not a JSON object)` : "";
      setResult({ ok: true, text: `${dryRun ? "would replay" : "replayed"} ${r.replayed}, skipped ${r.skipped} (already replayed to that target)${odd}` });
      onDone();
    } catch (e) {
      // A 404 of the route itself (not of a processor): a service from before DLQ replay.
      const why = e.status === 404 && e.body.errorCode === "NOT_FOUND" ? " (this service has no replay route yet)" : "";
      setResult({ ok: false, text: (e.status ? explain(e) : e.message) + why });
    }
  };
  return (
    <div class="replay" data-testid={single ? "replay-one" : "replay-all"}>
      <b>{single ? "Replay this record" : "Replay the records matching the filters"}</b> into{" "}
      <select value={kind} onChange={(e) => setKind(e.target.value)} data-testid="replay-kind">
        <option value="processor">processor</option>
        <option value="connection">HttpIngest connection</option>
      </select>{" "}
      {kind === "processor" ? (
        <select value={target} onChange={(e) => setTarget(e.target.value)} data-testid="replay-target">
          <option value="">choose…</option>
          {processors.map((p) => <option value={p}>{p}</option>)}
        </select>
      ) : (
        <input value={target} placeholder="connection name" onInput={(e) => setTarget(e.target.value)} data-testid="replay-target" />
      )}{" "}
      <label><input type="checkbox" checked={dryRun} onChange={(e) => setDryRun(e.target.checked)} /> dry run</label>{" "}
      <button disabled={!target} onClick={run} data-testid="replay-submit">Replay</button>
      {result && <p class={result.ok ? "ok" : "error"} data-testid="replay-result">{result.text}</p>}
    </div>
  );
}

function Record({ record, index, selected, onSelect }) {
  const info = record.errInfo || {};
  return (
    <>
      <tr class="clickable" onClick={onSelect} data-testid={`dlq-record-${index}`}>
        <td>{record.dlqTime && (record.dlqTime.$date || record.dlqTime)}</td>
        <td>{record.operatorName}</td>
        <td>{info.reason}</td>
        <td data-testid="replayed-to">{record.replayedTo ? `replayed to ${[].concat(record.replayedTo).join(", ")}` : ""}</td>
      </tr>
      {selected && (
        <tr>
          <td colSpan={4} data-testid="dlq-detail">
            <h3>Document</h3>
            <JsonView value={ownFieldsFirst(record.doc)} testid="dlq-doc" />
            <h3>errInfo</h3>
            <JsonView value={record.errInfo ?? null} testid="dlq-errinfo" />
          </td>
        </tr>
      )}
    </>
  );
}

export function Dlq({ name }) {
  const [draft, setDraft] = useState(EMPTY);
  const [filters, setFilters] = useState(EMPTY);
  const [selected, setSelected] = useState(null);
  const [list] = usePoll(() => api("/processors", { query: { itemsPerPage: 500 } }), 0, []);
  const processors = list ? list.results.map((p) => p.name) : [];
  const [page, error, reload] = usePoll(
    () =>
      name
        ? api(`/processors/${enc(name)}/dlq`, {
            query: { ...filters, from: iso(filters.from), to: iso(filters.to), limit: 500, sort: "desc" },
          })
        : Promise.resolve(null),
    5,
    [name, JSON.stringify(filters)],
  );
  const field = (key, label, type = "text") => (
    <label>
      {label}{" "}
      <input type={type} value={draft[key]} data-testid={`filter-${key}`} onInput={(e) => setDraft({ ...draft, [key]: e.target.value })} />
    </label>
  );
  const records = (page && page.results) || [];
  const current = records.find((r) => idOf(r) === selected);
  return (
    <>
      <h1>Dead letter queue</h1>
      <label>
        Processor{" "}
        <select value={name || ""} onChange={(e) => (location.hash = `#/dlq/${enc(e.target.value)}`)} data-testid="dlq-processor">
          <option value="">choose…</option>
          {processors.map((p) => <option value={p}>{p}</option>)}
        </select>
      </label>
      {name && (
        <>
          <form class="filters" onSubmit={(e) => (e.preventDefault(), setFilters(draft))}>
            {field("reason", "Reason")}
            {field("operatorName", "Operator")}
            {field("from", "From", "datetime-local")}
            {field("to", "To", "datetime-local")}
            {field("filter", "MQL filter")}
            <label>
              Replayed{" "}
              <select value={draft.replayed} data-testid="filter-replayed" onChange={(e) => setDraft({ ...draft, replayed: e.target.value })}>
                <option value="">any</option>
                <option value="true">yes</option>
                <option value="false">no</option>
              </select>
            </label>
            <button type="submit" data-testid="filter-apply">Filter</button>
          </form>
          {error && <p class="error">{error.status ? explain(error) : error.message}</p>}
          {page && (
            <>
              <p data-testid="dlq-total">{page.totalCount} records{page.totalCount > records.length ? ` (newest ${records.length} shown)` : ""}</p>
              <div class="counts">
                <table data-testid="dlq-by-reason"><thead><tr><th>Reason</th><th>Count</th></tr></thead>
                  <tbody>{counts(records, (r) => r.errInfo && r.errInfo.reason).map(([k, n]) => <tr><td>{k}</td><td>{n}</td></tr>)}</tbody></table>
                <table><thead><tr><th>Operator</th><th>Count</th></tr></thead>
                  <tbody>{counts(records, (r) => r.operatorName).map(([k, n]) => <tr><td>{k}</td><td>{n}</td></tr>)}</tbody></table>
              </div>
              {records.length > 0 && (
                <Chart title="DLQ records per minute by reason" unit="records" {...overTime(records)} testid="chart-dlq-time" />
              )}
              <Replay name={name} filters={filters} processors={processors} onDone={reload} />
              {current && current._id !== undefined && (
                <Replay name={name} filters={filters} processors={processors} single={current} onDone={reload} />
              )}
              <table data-testid="dlq-list">
                <thead><tr><th>DLQ time</th><th>Operator</th><th>Reason</th><th>Replay</th></tr></thead>
                <tbody>
                  {records.map((r, i) => (
                    <Record record={r} index={i} selected={idOf(r) === selected} onSelect={() => setSelected(idOf(r) === selected ? null : idOf(r))} />
                  ))}
                </tbody>
              </table>
            </>
          )}
        </>
      )}
    </>
  );
}
