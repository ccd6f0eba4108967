// Live line charts on uPlot. `series` is [{label, values}], `times` are epoch seconds.
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

const COLORS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2"];

export function Chart({ title, times, series, unit, testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  const shape = series.map((s) => s.label).join("|");

  useEffect(() => {
    const opts = {
      title,
      width: Math.max(320, (box.current.clientWidth || 480) - 8),
      height: 200,
      scales: { x: { time: true } },
      axes: [{}, { label: unit, size: 60 }],
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % 6], width: 2 }))],
    };
    plot.current = new uPlot(opts, [times, ...series.map((s) => s.values)], box.current);
    return () => plot.current.destroy();
  }, [shape]);

  useEffect(() => {
    if (plot.current) plot.current.setData([times, ...series.map((s) => s.values)]);
  }, [times, series]);

  return <div class="chart" ref={box} data-testid={testid} data-points={times.length} />;
}
