#pragma once
// SIGINT and SIGTERM ask the run to stop at the next step boundary, where it saves what it was
// asked to save and exits 128 + the signal (130, 143). A second signal ends the process at once.
namespace cnn::app {

void install_stop_handlers();
// 0 while no stop was asked, else the signal's number.
int stop_requested();

}  // namespace cnn::app
