// What the lifecycle's refusals mean, for the start / stop / drop buttons.
const EXPLAIN = {
  INVALID_STATE_TRANSITION:
    "The processor's state does not allow this: start works from CREATED, STOPPED or FAILED; stop from STARTED or FAILED.",
  CONCURRENT_MODIFICATION:
    "Another request changed this processor at the same moment; reload and try again.",
  PROCESSOR_ALREADY_EXISTS: "A processor with this name exists already; pick another name.",
  ENGINE_UNAVAILABLE: "Spark is not ready yet (it starts in the background); try again shortly.",
  CONNECTION_NOT_FOUND: "The pipeline names a connection that does not exist; create it first.",
  INVALID_PIPELINE: "The pipeline has problems; they are shown at their paths.",
};

export function explain(error) {
  if (!error) return null;
  const code = error.body && error.body.errorCode;
  const why = EXPLAIN[code];
  const head = `${error.status}${code ? ` ${code}` : ""}: ${error.message}`;
  return why ? `${head} — ${why}` : head;
}
