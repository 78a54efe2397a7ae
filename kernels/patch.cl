/* patch.cl - (being written) */
