#pragma once
// What the engine prints on std::cout (a run's plan, its epoch lines, its summary), sent to
// Python's sys.stdout while a PythonOutput lives, so that a notebook or redirect_stdout shows it
// where Python's own prints go. Made and destroyed with the GIL held; the engine may write with
// the GIL released, from any thread: each line takes the GIL to reach Python. Calls that overlap
// on several threads share one redirection: the first makes it, the last undoes it.
namespace cnn::python {

class PythonOutput {
 public:
  PythonOutput();
  ~PythonOutput();  // the last: what is left written, and std::cout's own buffer back
  PythonOutput(const PythonOutput&) = delete;
  PythonOutput& operator=(const PythonOutput&) = delete;
};

}  // namespace cnn::python
