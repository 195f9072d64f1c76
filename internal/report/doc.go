// Package report renders what a world's run witnessed as a page a person
// can read: a self-contained HTML document and its Markdown twin.
//
// Gather reads everything through the owning packages' APIs and computes
// nothing of its own: the run record and its verification
// (experiment.Verify, which replays a COMPLETE run with the frozen
// scorer), the receipt timeline (the chain that verification walked, listed as
// experiment.Timeline lists it), the RESULT (experiment.ParseResult),
// every archived observation re-scored by the frozen scorer
// (holdout.LoadCommitted, holdout.NewScorer), the interop comparison of the
// archived documents (holdout.CompareAll), the findings register
// (experiment.World.FindingsRegister: this run's findings, and apart from
// them those other runs opened), the questions log (holdout.Questions), for a run not
// yet COMPLETE the latest entry of the measurements log taken under one of
// its run_ids (experiment.ReadMeasurements) with the observations it archived
// (experiment.ReadArchived, re-digested) re-scored like a RESULT's archive and
// shown as a measurement, never as a result, and, when given, a clean-room
// transcript (harness.ReadTranscript). A part that cannot be read becomes a note in the
// report naming the file and the reason; the rest is still rendered, so a
// broken run can be looked at.
//
// It owns no record and writes nothing into the world. It refuses to
// overwrite an output file unless asked to replace it (then atomically: a
// reader sees the old page or the new one, never half of one).
//
// # Security Considerations
//
// Every string shown comes from files an implementer or a model may have
// written (observation values, transcript paths, rulings). The HTML is
// produced by html/template, which escapes every value for its context, and
// carries a Content-Security-Policy that forbids scripts, frames and every
// fetch (default-src 'none'; only the inline style sheet is allowed), so a
// hostile value can neither run code nor make the reader's browser call
// out. The Markdown escapes the characters that would start markup or break
// a table cell, and renders raw values in code spans.
package report
