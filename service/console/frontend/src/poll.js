import { useEffect, useState } from "preact/hooks";

// Calls `load` now and every `seconds`; returns [data, error, reload].
export function usePoll(load, seconds, deps = []) {
  const [state, setState] = useState({ data: null, error: null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    const run = () =>
      load().then(
        (data) => live && setState({ data, error: null }),
        (error) => live && setState((s) => ({ data: s.data, error })),
      );
    run();
    const timer = seconds ? setInterval(run, seconds * 1000) : null;
    return () => {
      live = false;
      if (timer) clearInterval(timer);
    };
  }, [...deps, tick]);
  return [state.data, state.error, () => setTick((t) => t + 1)];
}
