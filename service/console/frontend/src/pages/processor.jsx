import { useState } from "preact/hooks";
import { api, enc } from "../api.js";
import { usePoll } from "../poll.js";
import { Chart } from "../charts.jsx";
import { JsonView } from "../json.jsx";
import { explain } from "../lifecycle.js";
import { NO_DATA, bytes, duration, lagSeconds, rate } from "../format.js";

async function validate(pipeline, options) {
  try {
    return (await api("/pipelines:validate", { method: "POST", body: { pipeline, options } })).problems;
  } catch {
    return null; // no validation route on this service: show the record's warnings only
  }
}

function series(points) {
  const times = points.map((p) => Date.parse(p.time) / 1000);
  const operators = [...new Set(points.flatMap((p) => Object.keys(p.dlqRateByOperator || {})))];
  return {
    times,
    rates: [
      { label: "input/s", values: points.map((p) => p.inputRate) },
      { label: "processed (output)/s", values: points.map((p) => p.outputRate) },
    ],
    lag: [{ label: "event-time lag (s)", values: points.map((p) => p.eventTimeLagSeconds) }],
    dlq: operators.length
      ? operators.map((op) => ({
          label: op,
          values: points.map((p) => (p.dlqRateByOperator || {})[op] ?? null),
        }))
      : [{ label: "DLQ/s", values: points.map((p) => p.dlqRate) }],
  };
}

function Actions({ p, reload }) {
  const [message, setMessage] = useState(null);
  const act = async (label, call) => {
    setMessage(null);
    try {
      await call();
      setMessage({ ok: true, text: `${label}: done` });
      reload();
    } catch (e) {
      setMessage({ ok: false, text: explain(e) });
    }
  };
  const path = `/processors/${enc(p.name)}`;
  const drop = () => {
    if (confirm(`Drop ${p.name} with its checkpoints and state?`)) {
      act("drop", () => api(path, { method: "DELETE" })).then(() => (location.hash = "#/"));
    }
  };
  return (
    <div class="actions">
      {!p.ephemeral && (
        <button data-testid="start" onClick={() => act("start", () => api(`${path}:start`, { method: "POST" }))}>
          Start
        </button>
      )}
      <button data-testid="stop" onClick={() => act("stop", () => api(`${path}:stop`, { method: "POST" }))}>
        Stop
      </button>
      <button class="danger" data-testid="drop" onClick={drop}>
        Drop
      </button>
      {message && (
        <p class={message.ok ? "ok" : "error"} data-testid="action-message">
          {message.text}
        </p>
      )}
    </div>
  );
}

async function load(name) {
  const path = `/processors/${enc(name)}`;
  const [p, stats, history, sample] = await Promise.all([
    api(path),
    api(`${path}/stats`, { query: { verbose: true } }),
    api(`${path}/stats/history`).catch(() => ({ points: [] })),
    api(`${path}/sample`, { query: { limit: 20 } }).catch(() => ({ messages: [] })),
  ]);
  return { p, stats, history, sample };
}

/** A window operator's state (size, open window starts); empty for the other operators. */
function operatorState(op) {
  if (op.stateSize === undefined) return "";
  const open = op.minOpenWindowStartTime
    ? ` · open ${op.minOpenWindowStartTime}${op.maxOpenWindowStartTime !== op.minOpenWindowStartTime ? ` to ${op.maxOpenWindowStartTime}` : ""}`
    : "";
  return `${bytes(op.stateSize)}${open}`;
}

export function Processor({ name }) {
  const [data, error, reload] = usePoll(() => load(name), 2, [name]);
  const [problems] = usePoll(
    () => (data ? validate(data.p.pipeline, data.p.options) : Promise.resolve(null)),
    0,
    [name, !!data],
  );
  if (!data) return <p>{error ? error.message : "Loading…"}</p>;
  const { p, stats, history, sample } = data;
  const points = history.points || [];
  const last = points[points.length - 1] || {};
  const chart = series(points);
  const shown = [...(problems || []), ...(p.warnings || [])];
  const outputs = sample.messages.filter((m) => !m._dlqMessage);
  return (
    <>
      <h1>
        {p.name} <span class={`state state-${p.state}`} data-testid="processor-state">{p.state}</span>
        {p.ephemeral && <small data-testid="ephemeral"> ephemeral (sluice process; stops with its client)</small>}
      </h1>
      {error && <p class="error">{error.message}</p>}
      <Actions p={p} reload={reload} />
      <section class="cards">
        <div>Input <b data-testid="input-count">{stats.inputMessageCount ?? NO_DATA}</b> <small data-testid="input-rate">{rate(last.inputRate)}</small></div>
        <div>Output <b data-testid="output-count">{stats.outputMessageCount}</b> <small>{rate(last.outputRate)}</small></div>
        <div>DLQ <b data-testid="dlq-count">{stats.dlqMessageCount}</b> <small>{rate(last.dlqRate)}</small> <a href={`#/dlq/${enc(p.name)}`}>open DLQ</a></div>
        <div>Event-time lag <b data-testid="lag">{duration(lagSeconds(stats.watermark))}</b></div>
        <div>Watermark <b data-testid="watermark">{stats.watermark ? stats.watermark.$date : NO_DATA}</b></div>
        <div>Open windows <b data-testid="open-windows">{stats.openWindows ?? NO_DATA}</b> <small>{stats.oldestOpenWindowStart ? `oldest ${stats.oldestOpenWindowStart}` : ""}</small></div>
        {stats.sourceLag && (
          <div data-testid="source-lag">Kafka lag <b>{stats.sourceLag.totalLag ?? NO_DATA}</b>
            {stats.sourceLag.partitions.map((part) => (
              <small> {part.topic}/{part.partition}: {part.lag ?? NO_DATA}</small>
            ))}
          </div>
        )}
        <div>State size <b>{bytes(stats.stateSize)}</b></div>
        <div>Restarts <b>{stats.retries ?? NO_DATA}</b></div>
      </section>
      {stats.lastError && <p class="error">Last error: {stats.lastError.code}: {stats.lastError.message}</p>}
      <section class="charts" data-testid="charts">
        <Chart title="Input vs processed rate" unit="msg/s" times={chart.times} series={chart.rates} testid="chart-rates" />
        <Chart title="Event-time lag" unit="s" times={chart.times} series={chart.lag} testid="chart-lag" />
        <Chart title="DLQ rate by operator" unit="msg/s" times={chart.times} series={chart.dlq} testid="chart-dlq" />
      </section>
      <h2>Pipeline</h2>
      <JsonView value={p.pipeline} base="/pipeline" problems={shown} testid="pipeline" />
      <h2>Operators</h2>
      <table>
        <thead><tr><th>Operator</th><th>Input</th><th>Output</th><th>DLQ</th><th>State</th></tr></thead>
        <tbody>
          {(stats.operatorStats || []).map((op) => (
            <tr data-testid={`operator-${op.name}`}><td>{op.name}</td><td>{op.inputMessageCount ?? NO_DATA}</td><td>{op.outputMessageCount ?? NO_DATA}</td><td>{op.dlqMessageCount}</td><td data-testid={`operator-state-${op.name}`}>{operatorState(op)}</td></tr>
          ))}
        </tbody>
      </table>
      <h2>Recent output</h2>
      <div data-testid="output-sample">
        {outputs.length ? outputs.map((m) => <JsonView value={m} />) : <p>{NO_DATA}</p>}
      </div>
    </>
  );
}
