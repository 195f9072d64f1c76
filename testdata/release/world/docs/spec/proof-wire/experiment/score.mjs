// Synthetic instrument file: its bytes are digested, it is never run.
export function score(observations) {
  return observations.filter((o) => o.verdict === "ACCEPT").length;
}
