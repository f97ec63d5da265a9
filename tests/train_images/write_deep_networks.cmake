# Writes network texts LAYERS layers deep into the folder OUT (cmake -P, for deep_networks.cmake):
#   relus.txt      a convolution, then ReLUs
#   residual.txt   conv-BatchNorm-ReLU blocks, a residual addition every other block
string(REPEAT "relu\n" ${LAYERS} relus)
file(WRITE ${OUT}/relus.txt "conv 8 3 pad=1\n${relus}flatten\ndense 10\n")
set(text "conv 8 3 pad=1 as=b0\n")
math(EXPR blocks "${LAYERS} / 3")
foreach(i RANGE 1 ${blocks})
  math(EXPR odd "${i} % 2")
  math(EXPR before "${i} - 2")
  if(odd)
    string(APPEND text "conv 8 3 pad=1\nbatchnorm\nrelu as=b${i}\n")
  else()
    string(APPEND text "conv 8 3 pad=1\nbatchnorm\nrelu\nadd b${before} as=b${i}\n")
  endif()
endforeach()
file(WRITE ${OUT}/residual.txt "${text}flatten\ndense 10\n")
