#pragma once
// A data set of labelled images: what every source (IDX files, image folders, CIFAR files,
// segmentation and labels.csv folders, a split of any) offers the loader; opening one from a
// folder, whatever its kind; and what an image goes through before a network sees it.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/base/task.hpp>

namespace cnn::data {

struct SampleShape {
  int channels = 1, height = 0, width = 0;
  std::size_t elements() const {
    return static_cast<std::size_t>(channels) * static_cast<std::size_t>(height) *
           static_cast<std::size_t>(width);
  }
  friend bool operator==(const SampleShape&, const SampleShape&) = default;
};

// A window of an image, in the pixels it is stored at: rows [top, top + height), columns [left,
// left + width); torchvision's (i, j, h, w).
struct ImageWindow {
  int top = 0, left = 0, height = 0, width = 0;
};

// Picks the window of an image of height x width to take a sample from (a random resized crop's
// draw: data/augmentation.hpp). It must lie inside the image and hold a pixel.
class WindowChooser {
 public:
  virtual ImageWindow choose(int height, int width) const = 0;

 protected:
  ~WindowChooser() = default;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::size_t size() const = 0;
  virtual SampleShape shape() const = 0;  // what load() writes
  // What the samples are labelled for (base/task.hpp). A classification's label is load()'s;
  // the other tasks' targets are load_target()'s, and load() returns 0.
  virtual Task task() const { return Task::classify; }
  // The classes (classify, segment, multilabel) or the regression's targets: their count, and
  // their names.
  virtual int num_classes() const = 0;
  virtual std::vector<std::string> class_names() const = 0;
  // e.g. "IDX /usr/share/.../train-images-idx3-ubyte.gz: 60000 images 1x28x28, 10 classes"
  virtual std::string description() const = 0;
  // Writes shape().elements() floats, CHW, scaled to [0,1], into out; returns the label.
  // Thread-safe (const). Throws DataError.
  virtual int load(std::size_t index, float* out) const = 0;
  virtual std::size_t host_bytes() const = 0;  // bytes the data set holds in host memory
  // The label alone. The default decodes the sample; data sets that hold labels override it.
  virtual int label(std::size_t index) const;
  // Writes sample `index`'s target, target_bytes() of it: a segmentation's mask (shape().height
  // x shape().width bytes, row by row: a class, or kIgnoreMask), a multi-label's num_classes()
  // floats (0 or 1), a regression's num_classes() floats. Thread-safe (const). Throws DataError.
  // A classification has none: the default throws std::logic_error.
  virtual void load_target(std::size_t index, void* out) const;
  // cnn::target_bytes of this data set's task and shape; 0 for a classification.
  std::size_t target_bytes() const;
  // Sample `index` taken as the window `choose` picks of its image, resized (bilinear) to
  // shape(), mirrored left-right when `mirror`; CHW floats of [0, 1] as load() writes; returns
  // the label. Data sets of image files pick from the image as the file stores it, before any
  // resizing (a JPEG decoded at a reduced DCT scale where the window allows); the default picks
  // from load()'s sample, through `scratch` (shape().elements() floats). Thread-safe. Throws
  // DataError.
  virtual int load_window(std::size_t index, const WindowChooser& choose, bool mirror, float* out,
                          float* scratch) const;
  // The ImageFolderOptions::resize_shorter_side its images are framed by (0: stretched, or not
  // images of files), which a model trained on it records.
  virtual int resize_shorter_side() const { return 0; }
};

// "1x28x28"
std::string to_string(const SampleShape& shape);

// ---- Preprocessing: what an image goes through before a network sees it: converted to a channel
// count, resized, scaled to [0, 1] and normalised per channel. A saved model records it, so that
// the images it is given later go through the same (train_images --predict, an application's
// inference).

// x' = (x - mean[c]) / stddev[c] for channel c: one value each for every channel, or one per
// channel; none (empty) leaves the values as they are.
struct Normalization {
  std::vector<float> mean;
  std::vector<float> stddev;
  bool empty() const { return mean.empty() && stddev.empty(); }
};

struct Preprocessing {
  SampleShape shape;           // channels, height and width an image is brought to
  Normalization normalization;
  // 0: the whole image stretched to shape; S: framed as ImageFolderOptions::resize_shorter_side.
  int resize_shorter_side = 0;
};

// Throws ConfigError unless resize_shorter_side is 0 (stretching) or from the shape's larger
// side (the centre crop lies inside the resized image) up to kMaxResizeShorterSide.
inline constexpr int kMaxResizeShorterSide = 16384;
void check_framing(SampleShape shape, int resize_shorter_side);

// The per-channel statistics of ImageNet's training images (RGB, scaled to [0, 1]), which
// torchvision's, timm's and Keras's pretrained networks take their inputs normalised by.
Normalization imagenet_normalization();

// Throws ConfigError unless mean and stddev each hold 1 or `channels` finite values (stddev
// positive), or are both empty.
void check_normalization(const Normalization& n, int channels);
// Normalises one CHW sample in place.
void normalize(float* sample, SampleShape shape, const Normalization& n);
// Each channel's mean and standard deviation over every pixel of every sample of `data` (as
// load() gives them: scaled to [0, 1]), in one pass, in double precision.
Normalization measure_normalization(const Dataset& data);

// Whether the file name is one of an image the engine reads: .png, .jpg, .jpeg, .bmp, any case.
bool is_image_file(const std::filesystem::path& file);

// An image file as a network takes it: decoded (and checked: DataError naming the file),
// converted to p.shape.channels, resized to p.shape, scaled to [0, 1] and normalised.
std::vector<float> preprocess_image(const std::filesystem::path& file, const Preprocessing& p);

// ---- Opening a data set folder, whatever its kind.

// Images are refused before decoding when width x height x channels, in bytes as they decode (a
// 16-bit PNG value takes 2), is over this, or a progressive JPEG's coefficients (2 bytes each,
// every component) are. 256 MiB holds an 8192x8192 RGBA image or an 89-megapixel RGB photo, far
// more than a CNN trains on; each decoding thread may hold about that much while it decodes.
inline constexpr std::size_t kDefaultMaxDecodedImageBytes = std::size_t{256} << 20;

// Data sets up to this many decoded bytes are decoded at open and held in memory; larger ones
// check each image at open (its header read and checked) and decode it in load().
inline constexpr std::size_t kEagerDecodeLimit = std::size_t{1} << 30;

// Images decoded once and kept decoded (data/detail/decoded_cache.hpp), for data sets of image
// files decoded on load: each kept at `shorter_side` on its shorter side (its aspect kept), 8-bit,
// in memory or in a file in `folder`, up to max_bytes (the images beyond are decoded from their
// files every time). Its pages are host memory outside the plan: max_bytes is their bound.
struct DecodedCacheOptions {
  bool enabled = false;
  std::filesystem::path folder;  // empty: in memory; else the cache's file is kept there from run to run
  std::size_t max_bytes = std::size_t{4} << 30;
  // 0: the framing's side (ImageFolderOptions::resize_shorter_side), else the target's larger side
  int shorter_side = 0;
};

struct ImageFolderOptions {
  std::size_t eager_decode_limit = kEagerDecodeLimit;  // see kEagerDecodeLimit
  // An image is refused before it is decoded when its decoded size is over this (see
  // kDefaultMaxDecodedImageBytes).
  std::size_t max_decoded_image_bytes = kDefaultMaxDecodedImageBytes;
  // How an image of another size becomes a sample. 0: stretched whole to the target's height x
  // width (bilinear; a mask by nearest neighbour). S > 0: torchvision's evaluation framing,
  // Resize(S) then CenterCrop: the shorter side resized to S (the aspect kept), then the target's
  // size cropped from the centre (check_framing). A model records it (Preprocessing).
  int resize_shorter_side = 0;
  // Leave out images that cannot be read (corrupt, truncated, not an image, over the size limit)
  // instead of failing; the data set's description counts them. A class folder left with no
  // image is still an error.
  bool skip_corrupt = false;
  // Class folders decoded on load (over eager_decode_limit) keep their images decoded here.
  DecodedCacheOptions cache;
  // Called once for each image left out, in file order, on the thread that opens the folder,
  // with a line naming the file and why ("skipped <path>: <what was wrong>").
  std::function<void(const std::string& warning)> on_skipped;
};

struct DatasetSplits {
  std::unique_ptr<Dataset> train, test;
  // "idx", "cifar-10", "cifar-100", "image-folder", "segmentation", "multilabel" or "regression"
  std::string kind;
  std::vector<std::filesystem::path> files;  // every file the data set reads (nothing may write over one)
  std::unique_ptr<Dataset> validation;       // a val/ folder beside train/ and test/; none elsewhere
  std::filesystem::path folder;              // the folder it was opened from (nothing may write inside it)
};

// The train and test sides of the data set in `folder`, the first of these layouts it holds:
//  - IDX: train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz] and the t10k-... (or
//    test-...) pair, and the class names from classes.txt beside them, where there is one;
//  - CIFAR-10 or CIFAR-100 binary files (CIFAR-100 with its fine labels);
//  - a segmentation (kind "segmentation"): train/ and test/ each holding images/ (PNG, JPEG or
//    BMP) and masks/, one mask an image of its name (images/a.jpg, masks/a.png): an 8-bit
//    greyscale PNG of the image's size whose values are classes, 255 none (kIgnoreMask). The
//    classes are named by classes.txt beside train/, one a line; without it they are 0 up to the
//    largest value of the train masks, named "0", "1", ... (data/segmentation_dataset.hpp);
//  - a multi-label or regression data set (kind "multilabel" or "regression"): train/ and test/
//    each holding images/ (in sub-folders or not) and labels.csv, a header 'file,<name>,...' and a
//    row an image: its path under images/, then its labels (0 or 1) or targets (numbers). It is
//    multi-label where every value of train/labels.csv is 0 or 1, else regression, unless `task`
//    says which (data/image_table_dataset.hpp, data/detail/labels_csv.hpp);
//  - an image folder with train/ and test/ sub-folders, each holding one folder per class;
//  - a single folder of class folders: a seeded, stratified 1/6 of it is held out as test.
// The layouts of train/ and test/ take optionally val/ beside them (the validation set, of the
// same layout). Anything else is a DataError saying what was looked for. `target` and `images`
// apply to image folders: images are converted to target.channels (1 or 3; 0: grey or colour as
// the first image is) and resized (bilinear; a mask by nearest neighbour) to target.height x
// target.width (height 0: the first image's size; width 0 alone: a square). The test side takes
// the train side's shape, options and task, and must have the same classes (or labels.csv header).
// `task`: what the caller trains for; none to take what the folder holds. A folder that holds
// another task's data set is a ConfigError saying what it holds (regress on a labels.csv of 0s
// and 1s is the one choice a folder leaves).
DatasetSplits open_dataset(const std::filesystem::path& folder, SampleShape target = {}, std::uint64_t seed = 1,
                           const ImageFolderOptions& images = {}, std::optional<Task> task = std::nullopt);

// ---- Class names for data whose own are numbers (IDX files).

// Where Debian's dataset-fashion-mnist installs its IDX files, and the names of its ten classes,
// which open_dataset gives that folder's data (its files only number them) where no classes.txt
// names them otherwise.
inline constexpr const char* kFashionMnistFolder = "/usr/share/datasets/fashion-mnist";
const std::vector<std::string>& fashion_mnist_classes();

// `data` under other names, as many as its classes and all different (ConfigError otherwise).
std::unique_ptr<Dataset> with_class_names(std::unique_ptr<Dataset> data, std::vector<std::string> names);
// Every side of `splits` under the names of a file, one a line, as many as the classes (blank lines
// after the last are ignored). A DataError names the file and what is wrong.
void name_classes(DatasetSplits& splits, const std::filesystem::path& names_file);

// ---- Parts of a data set. Each holds a reference: `data` must outlive it.

struct ValidationSplit {
  std::unique_ptr<Dataset> train, validation;
};

// Holds out `fraction` (above 0, below 1) of each class of `data` for validation: round(fraction
// x n) of a class of n samples, at least one where n >= 2 and never all, chosen by `seed` (the
// same seed and fraction on the same data give the same split). A data set of another task than
// classification has no classes to stratify by: round(fraction x n) of all its n samples are held
// out, chosen by `seed` alike. Both sides keep the data's order and its task, and they are
// disjoint. A ConfigError when the fraction is out of range or a side would be empty.
ValidationSplit split_for_validation(const Dataset& data, double fraction, std::uint64_t seed);

// The first `count` samples of `data` (all of them when it holds fewer): a quick run's data.
std::unique_ptr<Dataset> first_samples(const Dataset& data, std::size_t count);

}  // namespace cnn::data
