#!/bin/bash
set -e
cat > linecount.cpp <<'CPP'
#include <iostream>

int main() {
    std::ios::sync_with_stdio(false);
    long lines = 0
    char c;
    while (std::cin.get(c)) {
        if (c == '\n') {
            ++lines;
        }
    }
    std::cout << lines << std::endl;
    return 0;
}
CPP
