import { useEffect, useRef, useState } from "preact/hooks";
import { api, enc } from "../api.js";
import { JsonView } from "../json.jsx";
import { explain } from "../lifecycle.js";

const EXAMPLE = JSON.stringify(
  [
    { $source: { connectionName: "sample_stream_solar" } },
    {
      $tumblingWindow: {
        interval: { size: 10, unit: "second" },
        pipeline: [{ $group: { _id: "$device_id", avg: { $avg: "$obs.watts" } } }],
      },
    },
  ],
  null,
  2,
);

function parse(text, what) {
  try {
    return { value: text.trim() ? JSON.parse(text) : what === "options" ? {} : null };
  } catch (e) {
    return { error: `${what} is not valid JSON: ${e.message}` };
  }
}

// Validates as you type (debounced) through POST /pipelines:validate, which answers the same
// problems as create; create's own 422 is shown the same way.
export function Create() {
  const [name, setName] = useState("");
  const [text, setText] = useState(EXAMPLE);
  const [optionsText, setOptionsText] = useState("{}");
  const [problems, setProblems] = useState([]);
  const [warnings, setWarnings] = useState([]);
  const [status, setStatus] = useState(null);
  // A service without the validation route: problems come from create's 422 only, and must
  // not be wiped by a late answer of the (missing) route.
  const noRoute = useRef(false);
  const pipeline = parse(text, "pipeline");
  const options = parse(optionsText, "options");

  useEffect(() => {
    if (noRoute.current) setProblems([]); // stale: they were about the previous text
    if (pipeline.error || options.error) return undefined;
    const timer = setTimeout(async () => {
      try {
        const r = await api("/pipelines:validate", {
          method: "POST",
          body: { pipeline: pipeline.value, options: options.value },
        });
        setProblems(r.problems || []);
        setWarnings(r.warnings || []);
        setStatus(r.valid ? { ok: true, text: "valid" } : null);
      } catch (e) {
        if (e.status === 404 && e.body.errorCode === "NOT_FOUND") {
          if (!noRoute.current) {
            setStatus({ ok: false, text: "validation route not available on this service: problems show on create" });
          }
          noRoute.current = true;
        } else {
          setProblems(e.problems || []);
          setStatus({ ok: false, text: explain(e) });
        }
      }
    }, 300);
    return () => clearTimeout(timer);
  }, [text, optionsText]);

  const create = async (start) => {
    setStatus(null);
    try {
      await api("/processors", { method: "POST", body: { name, pipeline: pipeline.value, options: options.value } });
      if (start) await api(`/processors/${enc(name)}:start`, { method: "POST" });
      location.hash = `#/processors/${enc(name)}`;
    } catch (e) {
      setProblems(e.problems || []);
      setStatus({ ok: false, text: explain(e) });
    }
  };
  const blocked = !name || !!pipeline.error || !!options.error;
  return (
    <>
      <h1>Create a processor</h1>
      <label>
        Name <input value={name} onInput={(e) => setName(e.target.value)} data-testid="create-name" />
      </label>
      <div class="editor">
        <div>
          <h2>Pipeline</h2>
          <textarea rows={22} spellcheck={false} value={text} onInput={(e) => setText(e.target.value)} data-testid="create-pipeline" />
          <h2>Options</h2>
          <textarea rows={4} spellcheck={false} value={optionsText} onInput={(e) => setOptionsText(e.target.value)} data-testid="create-options" />
        </div>
        <div>
          <h2>
            Problems <span data-testid="problem-count">{problems.length}</span>
          </h2>
          {pipeline.error && <p class="error">{pipeline.error}</p>}
          {options.error && <p class="error">{options.error}</p>}
          {!pipeline.error && <JsonView value={pipeline.value} base="/pipeline" problems={problems.filter((p) => !p.path.startsWith("/options"))} testid="create-preview" />}
          {warnings.map((w) => (
            <p class="warning" data-path={w.path}>note {w.path}: {w.message} ({w.code})</p>
          ))}
          {problems.filter((p) => p.path.startsWith("/options") || !p.path.startsWith("/pipeline")).map((p) => (
            <p class="problem" data-path={p.path}>⚠ {p.path}: {p.message} ({p.code})</p>
          ))}
        </div>
      </div>
      <div class="actions">
        <button disabled={blocked} onClick={() => create(false)} data-testid="create-submit">Create</button>
        <button disabled={blocked} onClick={() => create(true)} data-testid="create-start">Create and start</button>
      </div>
      {status && <p class={status.ok ? "ok" : "error"} data-testid="create-status">{status.text}</p>}
    </>
  );
}
