import { api, enc } from "../api.js";
import { usePoll } from "../poll.js";
import { NO_DATA, bytes, duration, lagSeconds, rate } from "../format.js";

async function load() {
  const page = await api("/processors", { query: { itemsPerPage: 500 } });
  const latest = await Promise.all(
    page.results.map((p) =>
      api(`/processors/${enc(p.name)}/stats/history`, { query: { last: 1 } }).then(
        (h) => h.points[h.points.length - 1] || null,
        () => null,
      ),
    ),
  );
  return page.results.map((p, i) => ({ ...p, latest: latest[i] }));
}

export function Processors() {
  const [rows, error] = usePoll(load, 2);
  if (!rows) return <p>{error ? error.message : "Loading…"}</p>;
  return (
    <>
      <h1>Processors</h1>
      {error && <p class="error">{error.message}</p>}
      {!rows.length && (
        <p>
          No processors yet: <a href="#/create">create one</a>.
        </p>
      )}
      <table data-testid="processors-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>State</th>
            <th>Input</th>
            <th>Output</th>
            <th>DLQ</th>
            <th title="now − watermark">Event-time lag</th>
            <th>Open windows</th>
            <th>State size</th>
            <th>Restarts</th>
            <th>Last error</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((p) => {
            const s = p.stats || {};
            const last = p.latest;
            const err = s.lastError || p.error;
            return (
              <tr data-testid={`processor-row-${p.name}`}>
                <td>
                  <a href={`#/processors/${enc(p.name)}`}>{p.name}</a>
                </td>
                <td>
                  <span class={`state state-${p.state}`} data-testid="state">
                    {p.state}
                  </span>
                  {s.status && s.status !== p.state.toLowerCase() && <small> {s.status}</small>}
                </td>
                <td data-testid="input">
                  {rate(last && last.inputRate)} <small>({s.inputMessageCount ?? NO_DATA})</small>
                </td>
                <td data-testid="output">
                  {rate(last && last.outputRate)} <small>({s.outputMessageCount ?? NO_DATA})</small>
                </td>
                <td data-testid="dlq">
                  {rate(last && last.dlqRate)} <small>({s.dlqMessageCount ?? NO_DATA})</small>
                </td>
                <td data-testid="lag">{duration(lagSeconds(s.watermark))}</td>
                <td data-testid="open-windows" title="not reported by this service's stats yet">
                  {s.openWindows ?? NO_DATA}
                </td>
                <td>{p.state === "STARTED" || s.stateSize ? bytes(s.stateSize) : NO_DATA}</td>
                <td>{s.retries ?? NO_DATA}</td>
                <td class="error">{err ? `${err.code}: ${err.message}` : ""}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </>
  );
}
