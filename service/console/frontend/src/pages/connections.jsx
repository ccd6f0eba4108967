import { useState } from "preact/hooks";
import { api, enc } from "../api.js";
import { usePoll } from "../poll.js";
import { explain } from "../lifecycle.js";

const TYPES = ["HttpIngest", "Kafka", "Cluster", "Https", "Sample", "File"];
const HINT = {
  Kafka: '{"bootstrapServers": "host:9092", "authentication": {"mechanism": "PLAIN", "username": "u", "password": "…"}}',
  Cluster: '{"uri": "mongodb://user:password@host/"}',
  Https: '{"url": "https://…", "headers": {"Authorization": "Bearer …"}}',
  File: '{"directory": "/absolute/path"}',
  Sample: '{"rate": 10}',
};

// The list shows what the API returns, which never includes secrets; the form is cleared after
// a create so a typed password does not stay on screen.
export function Connections() {
  const [list, error, reload] = usePoll(() => api("/connections", { query: { itemsPerPage: 500 } }), 0, []);
  const [form, setForm] = useState({ name: "", type: "HttpIngest", config: "" });
  const [status, setStatus] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    try {
      const extra = form.config.trim() ? JSON.parse(form.config) : {};
      await api("/connections", { method: "POST", body: { ...extra, name: form.name, type: form.type } });
      setForm({ name: "", type: form.type, config: "" });
      setStatus({ ok: true, text: `created ${form.name}` });
      reload();
    } catch (e) {
      setStatus({ ok: false, text: e.status ? explain(e) : e.message });
    }
  };
  const remove = async (name) => {
    if (!confirm(`Delete connection ${name}?`)) return;
    try {
      await api(`/connections/${enc(name)}`, { method: "DELETE" });
      reload();
    } catch (e) {
      setStatus({ ok: false, text: explain(e) });
    }
  };
  const rows = (list && (list.results || list.data)) || [];
  return (
    <>
      <h1>Connections</h1>
      {error && <p class="error">{error.message}</p>}
      <table data-testid="connections-table">
        <thead><tr><th>Name</th><th>Type</th><th>Settings (secrets are never returned)</th><th>Created</th><th /></tr></thead>
        <tbody>
          {rows.map((c) => {
            const { name, type, builtIn, createdAt, ...rest } = c;
            return (
              <tr data-testid={`connection-${name}`}>
                <td>{name}</td><td>{type}</td><td><code>{JSON.stringify(rest)}</code></td>
                <td>{builtIn ? "built in" : createdAt}</td>
                <td>{!builtIn && <button class="link" onClick={() => remove(name)}>delete</button>}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <h2>New connection</h2>
      <form class="filters" onSubmit={submit}>
        <label>Name <input value={form.name} onInput={(e) => setForm({ ...form, name: e.target.value })} data-testid="connection-name" /></label>
        <label>Type{" "}
          <select value={form.type} onChange={(e) => setForm({ ...form, type: e.target.value })} data-testid="connection-type">
            {TYPES.map((t) => <option value={t}>{t}</option>)}
          </select>
        </label>
        <label>Settings (JSON){" "}
          <input class="wide" value={form.config} placeholder={HINT[form.type] || "{}"} onInput={(e) => setForm({ ...form, config: e.target.value })} data-testid="connection-config" />
        </label>
        <button type="submit" data-testid="connection-submit">Create</button>
      </form>
      {status && <p class={status.ok ? "ok" : "error"} data-testid="connection-status">{status.text}</p>}
    </>
  );
}
